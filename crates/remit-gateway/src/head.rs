//! The log's signed head ([`SignedHead`]): the gateway's signed statement of its log's head, which the store keeps
//! and [`crate::audit`] checks against the chain. Depends only on [`crate::keys`].

use crate::keys::{hex, public_key_text, signature, verifying_key, SigningKey, VerifyingKey};

/// A signed head of the log: the gateway's statement that its log's entry `seq` had the hash `hash` at `time`,
/// signed with its log key (`--log-key`) over `remit-log-head 1\n{seq}\n{hash}\n{time}\n` (its own prefix, so that
/// no other signature of the same key can pass for one). A gateway writing a chain of its own in a log with several
/// writers signs its chain's head: `remit-log-head 2\n{writer}\n{seq}\n{hash}\n{time}\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedHead {
    /// The writer whose chain's head it is (`""`: the one-writer log).
    pub writer: String,
    pub seq: u64,
    pub hash: String,
    /// Unix seconds, the gateway's clock.
    pub time: i64,
    /// `remit-ed25519-public:HEX`.
    pub key: String,
    /// `ed25519:HEX`.
    pub signature: String,
}

fn head_message(writer: &str, seq: u64, hash: &str, time: i64) -> String {
    if writer.is_empty() {
        format!("remit-log-head 1\n{seq}\n{hash}\n{time}\n")
    } else {
        format!("remit-log-head 2\n{writer}\n{seq}\n{hash}\n{time}\n")
    }
}

impl SignedHead {
    /// Signs the head of the one-writer log.
    pub fn sign(key: &SigningKey, seq: u64, hash: &str, time: i64) -> SignedHead {
        SignedHead::sign_chain(key, "", seq, hash, time)
    }

    /// Signs the head of `writer`'s chain.
    pub fn sign_chain(key: &SigningKey, writer: &str, seq: u64, hash: &str, time: i64) -> SignedHead {
        use ed25519_dalek::Signer;
        let signature = key.sign(head_message(writer, seq, hash, time).as_bytes());
        SignedHead {
            writer: writer.to_string(),
            seq,
            hash: hash.to_string(),
            time,
            key: public_key_text(&key.verifying_key()),
            signature: format!("ed25519:{}", hex(&signature.to_bytes())),
        }
    }

    /// Checks the signature with `key`, or with the key the head names when none is given (which shows only that the
    /// head was not changed after it was signed, not who signed it).
    pub fn verify(&self, key: Option<&VerifyingKey>) -> Result<(), String> {
        use ed25519_dalek::Verifier;
        let named = verifying_key(&self.key).map_err(|e| format!("the head's key: {e}"))?;
        if key.is_some_and(|k| k != &named) {
            return Err("the head was signed by another key than the one given".into());
        }
        let signature = signature(&self.signature).ok_or("the head's signature is not `ed25519:HEX`")?;
        named.verify(head_message(&self.writer, self.seq, &self.hash, self.time).as_bytes(), &signature).map_err(|_| {
            "the head's signature does not verify: the head was changed after it was signed, or forged".to_string()
        })
    }

    /// The head as `remit audit head` prints it.
    pub fn to_json(&self) -> serde_json::Value {
        let mut head = serde_json::json!({"seq": self.seq, "hash": self.hash,
                           "time": remit_lang::value::format_timestamp(self.time), "key": self.key,
                           "signature": self.signature});
        if !self.writer.is_empty() {
            head["writer"] = self.writer.clone().into();
        }
        head
    }

    /// A head as [`SignedHead::to_json`] writes it.
    pub fn from_json(text: &str) -> Result<SignedHead, String> {
        let value = remit_lang::json::parse_stored(text).map_err(|e| format!("not JSON: {e}"))?;
        let field = |name: &str| {
            value.get(name).and_then(serde_json::Value::as_str).map(str::to_string).ok_or(format!("no `{name}`"))
        };
        let seq = value.get("seq").and_then(serde_json::Value::as_u64).ok_or("no `seq`")?;
        let time = remit_lang::value::parse_timestamp(&field("time")?).ok_or("`time` is not a timestamp")?;
        let writer = if value.get("writer").is_some() { field("writer")? } else { String::new() };
        Ok(SignedHead { writer, seq, hash: field("hash")?, time, key: field("key")?, signature: field("signature")? })
    }
}
