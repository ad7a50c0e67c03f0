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
//! DATA FILES (each as many bytes as its manifest entry says, in the manifest's order; none in most bundles)
//! MODULE BYTES (to the end of the file)
//! ```
//!
//! A bundle's data files (`data/*.json`, `data/*.csv` of the policy folder: [`crate::data`]'s formats) are named in
//! the manifest with their SHA-256 and length, so the signature covers them; a gateway that reads bundles without
//! data files finds the module changed and refuses such a bundle rather than serve it without its data. When a
//! bundle is taken ([`admit`]), its data replaces the data of the bundle before it, in the transaction that records
//! its revision ([`install_data`]).
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
    /// The data files between the signature line and the module, in order (absent when there are none, so that
    /// a bundle without data is written as before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<DataFile>,
}

/// A data file of a bundle, as its manifest names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFile {
    /// `data/NAME.json` or `data/NAME.csv`.
    pub name: String,
    /// `sha256:` of its bytes.
    pub sha256: String,
    pub bytes: u64,
}

impl Manifest {
    /// `sha256:` over the data files' names and digests, in order: what the store keeps as the bundle data in
    /// force (`None` for a bundle without data).
    pub fn data_digest(&self) -> Option<String> {
        if self.data.is_empty() {
            return None;
        }
        Some(sources_digest(self.data.iter().map(|f| (f.name.as_str(), f.sha256.as_str()))))
    }
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
    /// The data files (name, bytes), checked against the manifest.
    pub data: Vec<(String, Vec<u8>)>,
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
    write_with_data(module, &[], policy, revision, sources, built_at, key)
}

/// [`write`] with data files (`data/NAME.json` or `data/NAME.csv`, and their bytes).
pub fn write_with_data(
    module: &[u8],
    data: &[(String, Vec<u8>)],
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
        data: data
            .iter()
            .map(|(name, bytes)| DataFile { name: name.clone(), sha256: sha256(bytes), bytes: bytes.len() as u64 })
            .collect(),
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
    for (_, bytes) in data {
        out.extend_from_slice(bytes);
    }
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
        let mut rest = &rest[sig_end + 1..];
        let manifest: Manifest =
            serde_json::from_slice(&manifest_line).map_err(|e| format!("the bundle's manifest is not valid: {e}"))?;
        let mut data = Vec::with_capacity(manifest.data.len());
        for file in &manifest.data {
            let length = usize::try_from(file.bytes).ok().filter(|n| *n <= rest.len());
            let Some(length) = length else {
                return Err(format!("the bundle ends inside its data file `{}`", file.name));
            };
            let (bytes, after) = rest.split_at(length);
            if sha256(bytes) != file.sha256 {
                return Err(format!(
                    "the bundle's data file `{}` is not the one its manifest names: it was changed",
                    file.name
                ));
            }
            data.push((file.name.clone(), bytes.to_vec()));
            rest = after;
        }
        let module = rest.to_vec();
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
        Ok(Bundle { manifest, manifest_line, signature, data, module })
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
    admit_with_data(store, manifest, &[], now, force)
}

/// [`admit`] of a bundle with its data files (read first: a bad record refuses the bundle, naming the file and
/// the line): when the bundle is taken, its data is installed in the same transaction ([`install_data`]).
pub fn admit_with_data(
    store: &dyn Store,
    manifest: &Manifest,
    data: &[(String, Vec<u8>)],
    now: i64,
    force: bool,
) -> Result<(), String> {
    admit_or_fail(store, manifest, data, now, force).map_err(|e| match e {
        Admission::Refused(why) | Admission::StoreFailed(why) => why,
    })
}

/// Why [`admit_or_fail`] did not take a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// The bundle itself: its data, or its revision against the one in force. Taking it again refuses it again.
    Refused(String),
    /// The store could not be read or written: the same bundle may be taken once it answers again.
    StoreFailed(String),
}

/// [`admit_with_data`], saying whether the bundle or the store failed (a gateway that polls for published bundles
/// tries a bundle again after the store failed, never after it was refused).
pub fn admit_or_fail(
    store: &dyn Store,
    manifest: &Manifest,
    data: &[(String, Vec<u8>)],
    now: i64,
    force: bool,
) -> Result<(), Admission> {
    let records = read_data(data).map_err(Admission::Refused)?;
    let store_error = |e: StoreError| Admission::StoreFailed(format!("cannot check the bundle's revision: {e}"));
    let revision = manifest.revision.unwrap_or(0);
    let mut tx = store.begin().map_err(store_error)?;
    // The data of the bundle taken, whether or not its revision is new (the same bundle again changes nothing).
    install_data(tx.as_mut(), manifest, &records, now)
        .map_err(|e| Admission::StoreFailed(format!("cannot install the bundle's data: {e}")))?;
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
        return Err(Admission::Refused(format!(
            "{why}; to roll back on purpose, start the gateway with `--allow-rollback` (logged)"
        )));
    }
    if revision == in_force && !rollback {
        return tx.commit().map_err(store_error);
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

/// Publishes a signed bundle in the store (`remit bundle publish`), for every gateway that serves the store's bundle
/// (`remit serve --bundle-from-store`) to take on its next poll: the bytes are kept as given, with a `policy` entry
/// of the log naming them (`"published"`: the id, revision, policy, digest, and who published). What is checked
/// here only spares the operator a bundle every gateway would refuse: that it reads, that it is signed by `key`
/// when given, and that it is not older than the revision the store has in force. Each gateway checks it again
/// with its own key and the revision in force when it takes it ([`admit`]): whoever can write the table cannot
/// make a gateway serve what its key did not sign, nor an older revision.
pub fn publish(
    store: &dyn Store,
    bytes: &[u8],
    key: Option<&VerifyingKey>,
    by: &str,
    now: i64,
) -> Result<crate::store::PublishedBundle, String> {
    let bundle = Bundle::read(bytes)?;
    if let Some(key) = key {
        bundle.verify(key)?;
    }
    let revision = bundle.manifest.revision.unwrap_or(0);
    let store_error = |e: StoreError| format!("cannot publish the bundle: {e}");
    let mut tx = store.begin().map_err(store_error)?;
    if let Some((in_force, policy)) = tx.bundle_revision().map_err(store_error)? {
        if revision < in_force {
            return Err(format!(
                "the bundle is revision {revision}, older than revision {in_force} (policy `{policy}`), which this \
                 store has in force: every gateway would refuse it"
            ));
        }
    }
    let mut published = crate::store::PublishedBundle {
        id: 0,
        revision,
        policy: bundle.manifest.policy.clone(),
        sha256: sha256(bytes),
        published_by: by.to_string(),
        published_at: tx.now().unwrap_or(now),
        bytes: bytes.to_vec(),
    };
    published.id = tx.publish_bundle(&published).map_err(store_error)?;
    let body = serde_json::json!({"published": published.id, "revision": revision, "policy": published.policy,
                                  "sha256": published.sha256, "by": by});
    tx.append_log(published.published_at, "policy", &body.to_string()).map_err(store_error)?;
    tx.commit().map_err(store_error)?;
    Ok(published)
}

/// Logs what this gateway made of a published bundle (a `policy` entry of its own chain, so the log says which
/// replica took or refused which bundle): `{"published": ID, "revision", "policy", "serving": true}` once it was
/// verified and admitted, `{"published": ID, "revision", "policy", "refused": WHY}` (the revision and policy as
/// published, unverified) when it was not.
pub fn log_published(
    store: &dyn Store,
    published: &crate::store::PublishedBundle,
    outcome: Result<(), &str>,
    now: i64,
) -> Result<(), String> {
    let mut body = serde_json::json!({"published": published.id, "revision": published.revision,
                                      "policy": published.policy});
    match outcome {
        Ok(()) => body["serving"] = true.into(),
        Err(why) => body["refused"] = why.into(),
    }
    let store_error = |e: StoreError| format!("cannot log the published bundle: {e}");
    let mut tx = store.begin().map_err(store_error)?;
    let now = tx.now().unwrap_or(now);
    tx.append_log(now, "policy", &body.to_string()).map_err(store_error)?;
    tx.commit().map_err(store_error)
}

/// Reads a bundle's data files: all their records, in order; the error names the file and the line.
pub fn read_data(data: &[(String, Vec<u8>)]) -> Result<Vec<crate::data::Record>, String> {
    let mut records = Vec::new();
    for (name, bytes) in data {
        let format = crate::data::Format::of_file(name)
            .ok_or_else(|| format!("`{name}`: a bundle's data file is `.json`, `.jsonl` or `.csv`"))?;
        records.extend(crate::data::parse(bytes, format).map_err(|e| format!("`{name}`: {e}"))?);
    }
    Ok(records)
}

/// Installs a bundle's data in `tx`: when its data (its manifest's [`Manifest::data_digest`]) is not the data of
/// the bundle installed before, the bundle origin's data is replaced whole by `records`, the data version moves on
/// and one `data` entry is logged (digest, files, counts). Replaced, not merged: the bundle is a signed release, and
/// what a newer release no longer says (an owner removed, a membership revoked) must stop holding; the admin's own
/// changes (the other origin) stay. A bundle without data removes the data of the bundle before it.
pub fn install_data(
    tx: &mut dyn crate::store::Tx,
    manifest: &Manifest,
    records: &[crate::data::Record],
    now: i64,
) -> Result<(), StoreError> {
    let digest = manifest.data_digest();
    let installed = match (tx.data_state(), &digest) {
        (Ok(state), _) => state.bundle,
        // A store that keeps no data sets serves a bundle without data as before.
        (Err(_), None) => return Ok(()),
        (Err(e), Some(_)) => return Err(e),
    };
    if installed == digest {
        return Ok(());
    }
    let removed = tx.clear_data(crate::store::ORIGIN_BUNDLE)?;
    let counts = crate::data::write(tx, crate::store::ORIGIN_BUNDLE, records)?;
    let files: Vec<&str> = manifest.data.iter().map(|f| f.name.as_str()).collect();
    let body = serde_json::json!({"op": "bundle", "policy": manifest.policy, "revision": manifest.revision,
                                  "digest": digest, "files": files, "removed": removed, "entities": counts.entities,
                                  "tuples": counts.tuples, "holidays": counts.holidays});
    crate::core::log_data_change(tx, now, body, Some(digest))?;
    Ok(())
}
