//! Signed policy bundles: a decision module with a manifest (policy hash, revision, sources digest, build time, the
//! module's SHA-256) and an ed25519 signature over the manifest, so a gateway started with `--verify-key` serves
//! only policies its owner signed.
//!
//! The file (`remit build --bundle [--sign KEY]`):
//!
//! ```text
//! remit-bundle 1\n
//! {manifest JSON, one line}\n
//! ed25519:HEX-SIGNATURE-OF-THE-MANIFEST-LINE\n      (or `unsigned\n`)
//! MODULE BYTES (to the end of the file)
//! ```
//!
//! Keys are files of one line: `remit-ed25519-secret:HEX` (the 32-byte seed; written 0600) and
//! `remit-ed25519-public:HEX` (`remit keygen`).
//!
//! A bundle's revision is a whole number that grows with each bundle of a policy; the store keeps the revision in
//! force, so that putting an older bundle back (which would grant again what a newer one revoked) is refused, at
//! start and on reload, unless the operator forces it at start (`--allow-rollback`, logged): [`admit`].

use ed25519_dalek::{Signature, Signer, Verifier};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::keys::{hex, public_text, unhex};
/// A bundle's keys: what `remit keygen` writes, `remit build --sign` and `remit serve --verify-key` read.
pub use crate::keys::{keygen, public_key_text, signing_key, verifying_key, SigningKey, VerifyingKey};
use crate::store::{Store, StoreError};

const MAGIC: &[u8] = b"remit-bundle 1\n";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The policy hash (the module's `policy`).
    pub policy: String,
    /// The revision: one more than the bundle it replaces (`remit build --revision N`). `None` in a bundle written
    /// before revisions were numbers (whose `revision` was a free text or null): such a bundle counts as revision 0.
    #[serde(default, deserialize_with = "revision_number")]
    pub revision: Option<u64>,
    /// `sha256:` over the policy's source files (names and texts, standard library excluded).
    pub sources: String,
    /// `sha256:` of the module bytes.
    pub module: String,
    pub built_at: String,
    /// The public key that signed it (`remit-ed25519-public:HEX`), when signed.
    pub key: Option<String>,
}

/// A manifest's `revision`: a whole number; a text or null (bundles written before revisions were numbers) is none.
fn revision_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::Number(n) => {
            n.as_u64().map(Some).ok_or_else(|| serde::de::Error::custom("a bundle's revision is a whole number"))
        }
        _ => Ok(None),
    }
}

/// A bundle read from its bytes.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub manifest: Manifest,
    manifest_line: Vec<u8>,
    signature: Option<Signature>,
    pub module: Vec<u8>,
}

pub fn is_bundle(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// `sha256:` over `(name, text)` pairs in order.
pub fn sources_digest<'a>(files: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut hasher = Sha256::new();
    for (name, text) in files {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(text.as_bytes());
        hasher.update([0]);
    }
    format!("sha256:{}", hex(&hasher.finalize()))
}

/// Writes a bundle of `module`, signed with `key` when given.
pub fn write(
    module: &[u8],
    policy: &str,
    revision: u64,
    sources: String,
    built_at: String,
    key: Option<&SigningKey>,
) -> Vec<u8> {
    let manifest = Manifest {
        policy: policy.to_string(),
        revision: Some(revision),
        sources,
        module: sha256(module),
        built_at,
        key: key.map(|k| public_text(&k.verifying_key()).trim().to_string()),
    };
    let line = serde_json::to_string(&manifest).expect("plain data serializes");
    let signature = match key {
        Some(key) => format!("ed25519:{}", hex(&key.sign(line.as_bytes()).to_bytes())),
        None => "unsigned".to_string(),
    };
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(line.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(signature.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(module);
    out
}

impl Bundle {
    /// Reads a bundle and checks that the module is the one the manifest names (not the signature: [`verify`]).
    ///
    /// [`verify`]: Bundle::verify
    pub fn read(bytes: &[u8]) -> Result<Bundle, String> {
        let rest = bytes.strip_prefix(MAGIC).ok_or("not a remit bundle")?;
        let line_end = rest.iter().position(|&b| b == b'\n').ok_or("a bundle without a manifest")?;
        let manifest_line = rest[..line_end].to_vec();
        let rest = &rest[line_end + 1..];
        let sig_end = rest.iter().position(|&b| b == b'\n').ok_or("a bundle without a signature line")?;
        let signature_text = std::str::from_utf8(&rest[..sig_end]).map_err(|_| "a broken signature line")?;
        let module = rest[sig_end + 1..].to_vec();
        let manifest: Manifest =
            serde_json::from_slice(&manifest_line).map_err(|e| format!("the bundle's manifest is not valid: {e}"))?;
        let signature = match signature_text {
            "unsigned" => None,
            text => {
                let bytes = text.strip_prefix("ed25519:").and_then(unhex).ok_or("a broken signature")?;
                let bytes: [u8; 64] = bytes.try_into().map_err(|_| "an ed25519 signature has 64 bytes")?;
                Some(Signature::from_bytes(&bytes))
            }
        };
        if sha256(&module) != manifest.module {
            return Err("the bundle's module is not the one its manifest names: it was changed".into());
        }
        Ok(Bundle { manifest, manifest_line, signature, module })
    }

    pub fn signed(&self) -> bool {
        self.signature.is_some()
    }

    /// Checks the signature with `key`: an unsigned bundle, or one signed by another key or changed after signing,
    /// is refused.
    pub fn verify(&self, key: &VerifyingKey) -> Result<(), String> {
        let Some(signature) = &self.signature else {
            return Err("the bundle is not signed, and this gateway serves only signed bundles".into());
        };
        key.verify(&self.manifest_line, signature).map_err(|_| {
            "the bundle's signature does not verify with the given key: it was changed or signed by another key".into()
        })
    }
}

/// The revision of the bundle at `path`, when there is a readable bundle there (what `remit build` numbers the next
/// one after).
pub fn revision_at(path: &std::path::Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    Some(Bundle::read(&bytes).ok()?.manifest.revision.unwrap_or(0))
}

/// Checks a bundle's revision against the one the store keeps in force, and keeps it when it is newer, before the
/// bundle is served (at start, on reload). Refused: a revision older than the one in force, and the revision in
/// force with another policy (a revision names one policy); with `force` (`--allow-rollback`) either is taken and
/// logged as a rollback, and becomes the revision in force. Revision 0 (a bundle without a number) is the revision
/// in force of a store that has served none; two such bundles are not ordered. A newer revision is logged too (a
/// `policy` entry); the same revision and policy again changes nothing.
pub fn admit(store: &dyn Store, manifest: &Manifest, now: i64, force: bool) -> Result<(), String> {
    let store_error = |e: StoreError| format!("cannot check the bundle's revision: {e}");
    let revision = manifest.revision.unwrap_or(0);
    let mut tx = store.begin().map_err(store_error)?;
    let (in_force, in_force_policy) = tx.bundle_revision().map_err(store_error)?.unwrap_or((0, String::new()));
    let conflicting = revision == in_force && revision > 0 && in_force_policy != manifest.policy;
    let rollback = revision < in_force || conflicting;
    if rollback && !force {
        let why = if conflicting {
            format!(
                "the bundle is revision {revision}, which this store has served as policy `{in_force_policy}`, and \
                 it is policy `{}`: a revision names one policy (give the new bundle a higher `--revision`)",
                manifest.policy
            )
        } else {
            format!(
                "the bundle is revision {revision}, older than revision {in_force} (policy `{in_force_policy}`), \
                 which this store has served: an older bundle would grant again what a newer one revoked"
            )
        };
        return Err(format!("{why}; to roll back on purpose, start the gateway with `--allow-rollback` (logged)"));
    }
    if revision == in_force && !rollback {
        return Ok(());
    }
    tx.set_bundle_revision(revision, &manifest.policy).map_err(store_error)?;
    let body = serde_json::json!({
        "revision": revision,
        "policy": manifest.policy,
        "previous": (in_force > 0 || !in_force_policy.is_empty())
            .then(|| serde_json::json!({"revision": in_force, "policy": in_force_policy})),
        // Only ever `true` when forced: a rollback is never taken otherwise.
        "rollback": rollback,
    });
    tx.append_log(now, "policy", &body.to_string()).map_err(store_error)?;
    tx.commit().map_err(store_error)
}
