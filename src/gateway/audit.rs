//! The decision log as a hash chain: every entry hashes its predecessor's hash with its own content, so a changed,
//! deleted or reordered entry breaks the chain at that point ([`verify`]).

use sha2::{Digest, Sha256};

use super::store::LogEntry;

/// The `prev` of the first entry.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// `sha256:` + hex of SHA-256 over `prev \n seq \n time \n kind \n body`.
pub fn entry_hash(prev: &str, seq: u64, time: i64, kind: &str, body: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev.as_bytes());
    hasher.update(format!("\n{seq}\n{time}\n{kind}\n").as_bytes());
    hasher.update(body.as_bytes());
    format!("sha256:{}", hex(&hasher.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where a chain broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub seq: u64,
    pub problem: String,
}

/// Checks a whole log given in storage order: sequence numbers 1, 2, 3… without gaps, each `prev` the hash of the
/// entry before, each `hash` recomputed from the content. The number of entries when it holds.
pub fn verify(entries: impl IntoIterator<Item = LogEntry>) -> Result<u64, Broken> {
    let mut expected_prev = GENESIS.to_string();
    let mut count = 0u64;
    for entry in entries {
        count += 1;
        if entry.seq != count {
            let problem =
                format!("entry {} comes where entry {count} should: an entry was deleted or moved", entry.seq);
            return Err(Broken { seq: entry.seq, problem });
        }
        if entry.prev != expected_prev {
            let problem = "its `prev` is not the hash of the entry before it".to_string();
            return Err(Broken { seq: entry.seq, problem });
        }
        let hash = entry_hash(&entry.prev, entry.seq, entry.time, &entry.kind, &entry.body);
        if hash != entry.hash {
            let problem = "its content does not match its hash: the entry was changed".to_string();
            return Err(Broken { seq: entry.seq, problem });
        }
        expected_prev = entry.hash;
    }
    Ok(count)
}
