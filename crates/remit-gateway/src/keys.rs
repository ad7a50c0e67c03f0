//! ed25519 keys and signatures in their text forms — `remit-ed25519-secret:HEX` (the 32-byte seed),
//! `remit-ed25519-public:HEX` (`remit keygen` writes both) and `ed25519:HEX` — and hex: what signed bundles
//! ([`crate::bundle`]) and the log's signed heads ([`crate::head`]) are made of. Depends on nothing else of the crate.

use ed25519_dalek::Signature;
pub use ed25519_dalek::{SigningKey, VerifyingKey};

const SECRET: &str = "remit-ed25519-secret:";
const PUBLIC: &str = "remit-ed25519-public:";

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a hex text, `None` unless it is whole bytes of hex digits.
pub(crate) fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

/// A new key pair: (secret file text, public file text).
pub fn keygen() -> Result<(String, String), String> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| format!("no randomness from the system: {e}"))?;
    let key = SigningKey::from_bytes(&seed);
    Ok((format!("{SECRET}{}\n", hex(&seed)), public_text(&key.verifying_key())))
}

/// `remit-ed25519-public:HEX` and a line end: a public key file's text.
pub(crate) fn public_text(key: &VerifyingKey) -> String {
    format!("{PUBLIC}{}\n", hex(key.as_bytes()))
}

/// `remit-ed25519-public:HEX`, on one line without its end.
pub fn public_key_text(key: &VerifyingKey) -> String {
    format!("{PUBLIC}{}", hex(key.as_bytes()))
}

/// An `ed25519:HEX` signature.
pub(crate) fn signature(text: &str) -> Option<Signature> {
    let bytes: [u8; 64] = text.strip_prefix("ed25519:").and_then(unhex)?.try_into().ok()?;
    Some(Signature::from_bytes(&bytes))
}

pub fn signing_key(text: &str) -> Result<SigningKey, String> {
    let seed = text.trim().strip_prefix(SECRET).and_then(unhex).ok_or("not a remit secret key (`remit keygen`)")?;
    let seed: [u8; 32] = seed.try_into().map_err(|_| "a remit secret key has 32 bytes")?;
    Ok(SigningKey::from_bytes(&seed))
}

pub fn verifying_key(text: &str) -> Result<VerifyingKey, String> {
    let bytes = text.trim().strip_prefix(PUBLIC).and_then(unhex).ok_or("not a remit public key (`remit keygen`)")?;
    let bytes: [u8; 32] = bytes.try_into().map_err(|_| "a remit public key has 32 bytes")?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| format!("not a valid ed25519 public key: {e}"))
}
