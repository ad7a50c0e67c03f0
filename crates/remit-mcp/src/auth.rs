//! `remit mcp-proxy --listen --jwks FILE`: the proxy as an OAuth 2.1 resource server (MCP authorization, revision
//! 2025-06-18). An agent's bearer token is a JWT issued by an authorization server the proxy trusts: its signature is
//! checked against a key set (JWKS: RSA `RS256`/`RS384`/`RS512`/`PS256`/`PS384`/`PS512`, ECDSA `ES256`/`ES384`,
//! Ed25519 `EdDSA`; never a shared secret), then its issuer, its audience (the proxy's own resource URL unless
//! configured) and its validity window (`exp` required, `nbf` honoured, a small leeway). Its claims become the
//! agent's identity: the subject id (`sub` by default), the credential's scopes (`scope` space-separated, or an array;
//! `scp` when there is no `scope`) and the credential id (`client_id`, RFC 9068).
//!
//! The key set is a JWKS file read at start, or a URL (`--jwks-url`, or the issuer's `jwks_uri`:
//! [`discover_jwks_uri`]; `https://` to any host, its certificate checked as [`remit_gateway::client::Tls`] says, or plain
//! `http://` to a loopback host only: keys sent in the clear from another host could be replaced on the way) fetched
//! at start, again when it is older than the
//! refresh interval (on the request that finds it so; a failed fetch keeps the keys it has), and at once when a token
//! names a key the set does not have — at most once per [`UNKNOWN_KEY_REFETCH`], so tokens with made-up `kid`s cannot
//! make the proxy hammer the authorization server.
//!
//! Validity times are checked here rather than by `jsonwebtoken`: remit builds serde_json with
//! `arbitrary_precision`, under which the library's own `exp`/`nbf` parsing (`deserialize_any`) fails on every
//! number. The library checks the signature, the algorithm against the key, the issuer and the audience.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value as Json;

use remit_gateway::client::{blocking, Client, Target, Tls};

/// The longest bearer token the proxy reads.
pub const MAX_TOKEN: usize = 16 << 10;

/// What the proxy checks a token against and how it reads the identity from the claims.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// Accepted `aud` values (one must match).
    pub audiences: Vec<String>,
    /// Accepted `iss` values (one must match).
    pub issuers: Vec<String>,
    /// Seconds of clock skew allowed on `exp` and `nbf`.
    pub leeway: u64,
    /// The claim holding the subject id.
    pub subject_claim: String,
    /// The claim holding the scopes; `None`: `scope`, else `scp`.
    pub scope_claim: Option<String>,
    /// The claim holding the credential id.
    pub credential_claim: String,
}

impl JwtConfig {
    /// The defaults for `audiences` and `issuers`: `sub`, `scope`/`scp`, `client_id`, 30 s of leeway.
    pub fn new(audiences: Vec<String>, issuers: Vec<String>) -> JwtConfig {
        JwtConfig {
            audiences,
            issuers,
            leeway: 30,
            subject_claim: "sub".into(),
            scope_claim: None,
            credential_claim: "client_id".into(),
        }
    }
}

/// Who a valid token says the agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenIdentity {
    pub subject: String,
    pub credential: Option<String>,
    pub scopes: Vec<String>,
}

/// Why a token is refused (the `error_description` of the `401`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// Not three base64url parts with a JSON header, or too long.
    Malformed,
    /// The header names a key (`kid`) or an algorithm the key set does not have.
    UnknownKey,
    /// The signature does not verify.
    Signature,
    Expired,
    NotYetValid,
    Audience,
    Issuer,
    /// A claim the proxy needs is missing or not of its type.
    Claim(String),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Malformed => f.write_str("the token is not a JWT"),
            TokenError::UnknownKey => {
                f.write_str("the token is signed with a key or algorithm this server does not accept")
            }
            TokenError::Signature => f.write_str("the token's signature does not verify"),
            TokenError::Expired => f.write_str("the token expired"),
            TokenError::NotYetValid => f.write_str("the token is not valid yet"),
            TokenError::Audience => f.write_str("the token was not issued for this server (audience)"),
            TokenError::Issuer => f.write_str("the token was not issued by an accepted issuer"),
            TokenError::Claim(claim) => write!(f, "the token has no usable `{claim}` claim"),
        }
    }
}

/// One verification key: its id, the algorithm it verifies, the key.
struct Key {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

/// How often a token naming an unknown key may make the proxy fetch the key set again.
pub const UNKNOWN_KEY_REFETCH: Duration = Duration::from_secs(10);
/// The longest key set the proxy reads from a URL.
const MAX_KEY_SET: usize = 1 << 20;

/// A key set fetched from a URL, and when.
struct Fetched {
    url: String,
    /// Fetched again when older than this.
    refresh: Duration,
    /// The last fetch (or attempt), and the last one a token with an unknown key caused.
    state: std::sync::Mutex<(Instant, Option<Instant>)>,
    /// Fetches done, for tests and logs.
    fetches: std::sync::atomic::AtomicU64,
    /// The client it is fetched with (which https servers it trusts, a connection kept).
    client: Client,
}

/// Validates bearer JWTs against a key set.
pub struct JwtVerifier {
    keys: RwLock<Arc<Vec<Key>>>,
    config: JwtConfig,
    fetched: Option<Fetched>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier").field("keys", &self.keys().len()).field("config", &self.config).finish()
    }
}

/// The `jwks_uri` of `issuer`'s metadata: the OAuth authorization server metadata (RFC 8414, at
/// `/.well-known/oauth-authorization-server` with the issuer's path after it), else the OpenID Connect discovery
/// document (`/.well-known/openid-configuration` after the issuer). The document's `issuer` must be `issuer` exactly
/// (RFC 8414 §3.3), or its keys could be another server's. Fetched as [`fetch_key_set`] fetches (`https://`, or
/// `http://` to a loopback host), on the issuer's own scheme.
pub fn discover_jwks_uri(issuer: &str, tls: &Tls, timeout: Duration) -> Result<String, String> {
    let trimmed = issuer.trim_end_matches('/');
    let (scheme, rest) = trimmed.split_once("://").unwrap_or(("https", trimmed));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let candidates = [
        format!("{scheme}://{authority}/.well-known/oauth-authorization-server{path}"),
        format!("{trimmed}/.well-known/openid-configuration"),
    ];
    let client = Client::new(tls.clone());
    let mut tried = Vec::new();
    for url in &candidates {
        let text = match fetch_key_set(url, &client, timeout) {
            Ok(text) => text,
            Err(e) => {
                tried.push(e);
                continue;
            }
        };
        let metadata: Json = serde_json::from_str(&text).map_err(|e| format!("`{url}` is not JSON: {e}"))?;
        if metadata.get("issuer").and_then(Json::as_str) != Some(issuer) {
            return Err(format!("`{url}` names another issuer than `{issuer}`"));
        }
        return metadata
            .get("jwks_uri")
            .and_then(Json::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("`{url}` has no `jwks_uri`"));
    }
    Err(format!("no metadata for the issuer `{issuer}`: {}", tried.join("; ")))
}

/// Fetches the key set (or another document of the authorization server) at `url`: `https://` to any host (the
/// server's certificate checked against what `client` trusts), or plain `http://` to a loopback host only (keys fetched
/// in the clear from another host could be replaced on the way).
pub fn fetch_key_set(url: &str, client: &Client, timeout: Duration) -> Result<String, String> {
    let target = Target::parse(url)
        .map_err(|_| format!("`{url}`: a key set URL is `https://…` (or `http://` to a loopback host)"))?;
    if !target.tls && !target.is_loopback() {
        return Err(format!(
            "`{url}`: a key set over plain http is fetched only from a loopback host (keys sent in the clear could be \
             replaced on the way); use `https://`"
        ));
    }
    let accept = [("Accept", "application/json")];
    let mut response =
        blocking::send(client, "GET", url, &accept, None, timeout).map_err(|e| format!("`{url}`: {e}"))?;
    if response.status != 200 {
        return Err(format!("`{url}` answered HTTP {}", response.status));
    }
    let body = response.body_start(MAX_KEY_SET + 1).map_err(|e| format!("`{url}`: {e}"))?;
    if body.len() > MAX_KEY_SET {
        return Err(format!("`{url}`: the key set is larger than {MAX_KEY_SET} bytes"));
    }
    String::from_utf8(body).map_err(|_| format!("`{url}`: the key set is not UTF-8"))
}

/// The algorithm a key verifies: its `alg`, or the one its type implies (RSA: `RS256`).
fn key_algorithm(jwk: &Jwk) -> Result<Algorithm, String> {
    let implied = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            ref other => return Err(format!("the curve `{other:?}` is not supported (P-256, P-384)")),
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => Algorithm::EdDSA,
            ref other => return Err(format!("the curve `{other:?}` is not supported (Ed25519)")),
        },
        AlgorithmParameters::OctetKey(_) => {
            return Err("a shared secret (`oct`) is not accepted: a resource server verifies with public keys".into())
        }
    };
    let Some(stated) = &jwk.common.key_algorithm else { return Ok(implied) };
    let algorithm = match stated {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        other => return Err(format!("the algorithm `{other}` is not a signature algorithm this server accepts")),
    };
    let family = |a: Algorithm| match a {
        Algorithm::ES256 | Algorithm::ES384 => 1,
        Algorithm::EdDSA => 2,
        _ => 0,
    };
    if family(algorithm) != family(implied) || (family(implied) == 1 && algorithm != implied) {
        return Err(format!("`alg` is `{stated}`, which does not fit the key's type"));
    }
    Ok(algorithm)
}

impl JwtVerifier {
    /// A verifier for the keys of a JWKS document (`{"keys": [...]}`). Keys marked `"use": "enc"` are skipped; any
    /// other key this server cannot verify with is an error, and so is a set with no usable key.
    pub fn from_jwks(text: &str, config: JwtConfig) -> Result<JwtVerifier, String> {
        if config.audiences.is_empty() || config.issuers.is_empty() {
            return Err("a token's audience and issuer must be configured".into());
        }
        let keys = RwLock::new(Arc::new(parse_keys(text)?));
        Ok(JwtVerifier { keys, config, fetched: None })
    }

    /// A verifier for the key set at `url`, fetched now (an error when it cannot be, or has no usable key) and again
    /// as the module's header says; an `https://` server is trusted as `tls` says.
    pub fn from_url(url: &str, refresh: Duration, config: JwtConfig, tls: Tls) -> Result<JwtVerifier, String> {
        let client = Client::new(tls);
        let text = fetch_key_set(url, &client, Duration::from_secs(10))?;
        let mut verifier = JwtVerifier::from_jwks(&text, config).map_err(|e| format!("`{url}`: {e}"))?;
        let state = std::sync::Mutex::new((Instant::now(), None));
        let fetches = std::sync::atomic::AtomicU64::new(1);
        verifier.fetched = Some(Fetched { url: url.to_string(), refresh, state, fetches, client });
        Ok(verifier)
    }

    /// How many times the key set was fetched from its URL (0 for a file).
    pub fn fetches(&self) -> u64 {
        self.fetched.as_ref().map_or(0, |f| f.fetches.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn keys(&self) -> Arc<Vec<Key>> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Fetches the key set again when it is due: `unknown_key` (a token named a key the set lacks; at most once per
    /// [`UNKNOWN_KEY_REFETCH`]) or older than the refresh interval. Whether the keys were replaced. A fetch that
    /// fails, or a set without a usable key, leaves the keys as they were (said on stderr).
    fn refetch(&self, unknown_key: bool) -> bool {
        let Some(fetched) = &self.fetched else { return false };
        // One fetch at a time; a request that finds one running goes on with the keys there are.
        let Ok(mut state) = fetched.state.try_lock() else { return false };
        let now = Instant::now();
        let (last, last_unknown) = *state;
        let due = if unknown_key {
            last_unknown.is_none_or(|at| now.duration_since(at) >= UNKNOWN_KEY_REFETCH)
        } else {
            now.duration_since(last) >= fetched.refresh
        };
        if !due {
            return false;
        }
        *state = (now, if unknown_key { Some(now) } else { last_unknown });
        fetched.fetches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let keys =
            fetch_key_set(&fetched.url, &fetched.client, Duration::from_secs(5)).and_then(|text| parse_keys(&text));
        match keys {
            Ok(keys) => {
                *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(keys);
                true
            }
            Err(e) => {
                eprintln!("remit mcp-proxy: the key set was not fetched again, the keys stay as they were: {e}");
                false
            }
        }
    }
}

/// The keys of a JWKS document (`{"keys": [...]}`). Keys marked `"use": "enc"` are skipped; any other key this server
/// cannot verify with is an error, and so is a set with no usable key.
fn parse_keys(text: &str) -> Result<Vec<Key>, String> {
    let document: Json = serde_json::from_str(text).map_err(|e| format!("the key set is not JSON: {e}"))?;
    let Some(entries) = document.get("keys").and_then(Json::as_array) else {
        return Err("the key set has no `keys` array (a JWKS document: {\"keys\": [...]})".into());
    };
    let mut keys = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let name = match entry.get("kid").and_then(Json::as_str) {
            Some(kid) => format!("key `{kid}`"),
            None => format!("key {}", i + 1),
        };
        let jwk: Jwk = serde_json::from_value(entry.clone()).map_err(|e| format!("{name}: {e}"))?;
        if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
            continue;
        }
        let algorithm = key_algorithm(&jwk).map_err(|e| format!("{name}: {e}"))?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| format!("{name}: {e}"))?;
        keys.push(Key { kid: jwk.common.key_id.clone(), algorithm, key });
    }
    if keys.is_empty() {
        return Err("the key set has no signature key".into());
    }
    Ok(keys)
}

impl JwtVerifier {
    pub fn config(&self) -> &JwtConfig {
        &self.config
    }

    /// Checks `token` at `now` (seconds since the epoch) and reads the identity from its claims.
    pub fn verify(&self, token: &str, now: u64) -> Result<TokenIdentity, TokenError> {
        if token.len() > MAX_TOKEN {
            return Err(TokenError::Malformed);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Malformed)?;
        self.refetch(false);
        let fits = |k: &&Key| k.algorithm == header.alg && (header.kid.is_none() || k.kid == header.kid);
        let mut keys = self.keys();
        if !keys.iter().any(|k| fits(&k)) && self.refetch(true) {
            keys = self.keys();
        }
        let candidates: Vec<&Key> = keys.iter().filter(fits).collect();
        if candidates.is_empty() {
            return Err(TokenError::UnknownKey);
        }
        let mut validation = Validation::new(header.alg);
        // exp and nbf are checked below (see the module's header); nothing is required by the library.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.required_spec_claims.clear();
        validation.set_audience(&self.config.audiences);
        validation.set_issuer(&self.config.issuers);
        let mut refused = TokenError::Signature;
        let mut claims = None;
        for key in candidates {
            match jsonwebtoken::decode::<Json>(token, &key.key, &validation) {
                Ok(data) => {
                    claims = Some(data.claims);
                    break;
                }
                Err(e) => {
                    use jsonwebtoken::errors::ErrorKind;
                    refused = match e.kind() {
                        ErrorKind::InvalidAudience => TokenError::Audience,
                        ErrorKind::InvalidIssuer => TokenError::Issuer,
                        ErrorKind::InvalidSignature => TokenError::Signature,
                        ErrorKind::MissingRequiredClaim(claim) => TokenError::Claim(claim.clone()),
                        ErrorKind::InvalidToken | ErrorKind::Base64(_) | ErrorKind::Json(_) | ErrorKind::Utf8(_) => {
                            TokenError::Malformed
                        }
                        _ => TokenError::Signature,
                    };
                    // Only a bad signature is worth trying the next key with.
                    if refused != TokenError::Signature {
                        return Err(refused);
                    }
                }
            }
        }
        let claims = claims.ok_or(refused)?;
        // The library lets a token without `aud`/`iss` through when it checks them only if present.
        for (claim, error) in [("aud", TokenError::Audience), ("iss", TokenError::Issuer)] {
            if claims.get(claim).is_none() {
                return Err(error);
            }
        }
        let time = |claim: &str| -> Result<Option<u64>, TokenError> {
            match claims.get(claim) {
                None => Ok(None),
                Some(value) => value
                    .as_u64()
                    .or_else(|| value.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f as u64))
                    .map(Some)
                    .ok_or_else(|| TokenError::Claim(claim.into())),
            }
        };
        let leeway = self.config.leeway;
        let exp = time("exp")?.ok_or_else(|| TokenError::Claim("exp".into()))?;
        if exp.saturating_add(leeway) <= now {
            return Err(TokenError::Expired);
        }
        if time("nbf")?.is_some_and(|nbf| nbf > now.saturating_add(leeway)) {
            return Err(TokenError::NotYetValid);
        }
        let subject_claim = &self.config.subject_claim;
        let subject = claims
            .get(subject_claim)
            .and_then(Json::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| TokenError::Claim(subject_claim.clone()))?
            .to_string();
        let scopes = match &self.config.scope_claim {
            Some(claim) => scopes(claims.get(claim)).ok_or_else(|| TokenError::Claim(claim.clone()))?,
            None => match claims.get("scope") {
                Some(value) => scopes(Some(value)).ok_or_else(|| TokenError::Claim("scope".into()))?,
                None => scopes(claims.get("scp")).ok_or_else(|| TokenError::Claim("scp".into()))?,
            },
        };
        let credential = claims.get(&self.config.credential_claim).and_then(Json::as_str).map(str::to_string);
        Ok(TokenIdentity { subject, credential, scopes })
    }
}

/// Scopes from a claim: a space-separated string or an array of strings; absent: none. `None` for anything else.
fn scopes(value: Option<&Json>) -> Option<Vec<String>> {
    let mut scopes: Vec<String> = match value {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::String(text)) => text.split_ascii_whitespace().map(str::to_string).collect(),
        Some(Json::Array(items)) => {
            items.iter().map(|i| i.as_str().map(str::to_string)).collect::<Option<Vec<String>>>()?
        }
        Some(_) => return None,
    };
    scopes.sort();
    scopes.dedup();
    Some(scopes)
}

/// Seconds since the epoch, now.
pub fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    //! Keys generated here, tokens signed here: RS256, RS512, PS256, ES256, ES384 and EdDSA tokens that verify, and
    //! each way a token is refused.
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;
    use std::sync::OnceLock;

    const NOW: u64 = 1_800_000_000;

    struct Keys {
        rsa: (EncodingKey, Json),
        ec: (EncodingKey, Json),
        ec384: (EncodingKey, Json),
        ed: (EncodingKey, Json),
        other_rsa: EncodingKey,
    }

    fn rsa_key(kid: &str) -> (EncodingKey, Json) {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        use rsa::traits::PublicKeyParts;
        let private = rsa::RsaPrivateKey::new(&mut rand::rngs::OsRng, 2048).unwrap();
        let public = private.to_public_key();
        let der = private.to_pkcs1_der().unwrap();
        let jwk = json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                         "n": URL_SAFE_NO_PAD.encode(public.n().to_bytes_be()),
                         "e": URL_SAFE_NO_PAD.encode(public.e().to_bytes_be())});
        (EncodingKey::from_rsa_der(der.as_bytes()), jwk)
    }

    fn keys() -> &'static Keys {
        static KEYS: OnceLock<Keys> = OnceLock::new();
        KEYS.get_or_init(|| {
            use p256::pkcs8::EncodePrivateKey;
            let ec = p256::ecdsa::SigningKey::random(&mut rand::rngs::OsRng);
            let point = ec.verifying_key().to_encoded_point(false);
            let ec_jwk = json!({"kty": "EC", "crv": "P-256", "kid": "ec-1",
                                "x": URL_SAFE_NO_PAD.encode(point.x().unwrap()),
                                "y": URL_SAFE_NO_PAD.encode(point.y().unwrap())});
            let ec_der = ec.to_pkcs8_der().unwrap();
            let mut seed = [0u8; 32];
            getrandom::fill(&mut seed).unwrap();
            let ed = ed25519_dalek::SigningKey::from_bytes(&seed);
            let ed_der = {
                use ed25519_dalek::pkcs8::EncodePrivateKey;
                ed.to_pkcs8_der().unwrap()
            };
            let ed_jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed-1",
                                "x": URL_SAFE_NO_PAD.encode(ed.verifying_key().as_bytes())});
            let ec384 = p384::ecdsa::SigningKey::random(&mut rand::rngs::OsRng);
            let point = ec384.verifying_key().to_encoded_point(false);
            let ec384_jwk = json!({"kty": "EC", "crv": "P-384", "kid": "ec384-1",
                                   "x": URL_SAFE_NO_PAD.encode(point.x().unwrap()),
                                   "y": URL_SAFE_NO_PAD.encode(point.y().unwrap())});
            let ec384_der = ec384.to_pkcs8_der().unwrap();
            Keys {
                rsa: rsa_key("rsa-1"),
                ec: (EncodingKey::from_ec_der(ec_der.as_bytes()), ec_jwk),
                ec384: (EncodingKey::from_ec_der(ec384_der.as_bytes()), ec384_jwk),
                ed: (EncodingKey::from_ed_der(ed_der.as_bytes()), ed_jwk),
                other_rsa: rsa_key("rsa-1").0,
            }
        })
    }

    fn verifier() -> JwtVerifier {
        let k = keys();
        // The RSA key again, for RSASSA-PSS and SHA-512 (a key verifies one algorithm: its `alg`).
        let mut pss = k.rsa.1.clone();
        pss["kid"] = json!("rsa-pss");
        pss["alg"] = json!("PS256");
        let mut rs512 = k.rsa.1.clone();
        rs512["kid"] = json!("rsa-512");
        rs512["alg"] = json!("RS512");
        let jwks = json!({"keys": [k.rsa.1, pss, rs512, k.ec.1, k.ec384.1, k.ed.1,
                                   {"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB", "alg": "RSA-OAEP"}]});
        let config = JwtConfig::new(vec!["http://127.0.0.1:1/mcp".into()], vec!["https://as.example".into()]);
        JwtVerifier::from_jwks(&jwks.to_string(), config).unwrap()
    }

    fn claims() -> Json {
        json!({"iss": "https://as.example", "aud": "http://127.0.0.1:1/mcp", "sub": "agent:coder",
               "exp": NOW + 300, "iat": NOW, "scope": "files.read files.write", "client_id": "cred-1"})
    }

    fn sign(alg: Algorithm, kid: &str, key: &EncodingKey, claims: &Json) -> String {
        let mut header = Header::new(alg);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, claims, key).unwrap()
    }

    fn rs(claims: &Json) -> String {
        sign(Algorithm::RS256, "rsa-1", &keys().rsa.0, claims)
    }

    #[test]
    fn tokens_of_each_algorithm_verify_and_give_the_identity() {
        let v = verifier();
        let want = TokenIdentity {
            subject: "agent:coder".into(),
            credential: Some("cred-1".into()),
            scopes: vec!["files.read".into(), "files.write".into()],
        };
        assert_eq!(v.verify(&rs(&claims()), NOW), Ok(want.clone()));
        assert_eq!(v.verify(&sign(Algorithm::ES256, "ec-1", &keys().ec.0, &claims()), NOW), Ok(want.clone()));
        assert_eq!(v.verify(&sign(Algorithm::EdDSA, "ed-1", &keys().ed.0, &claims()), NOW), Ok(want.clone()));
        assert_eq!(v.verify(&sign(Algorithm::ES384, "ec384-1", &keys().ec384.0, &claims()), NOW), Ok(want.clone()));
        assert_eq!(v.verify(&sign(Algorithm::PS256, "rsa-pss", &keys().rsa.0, &claims()), NOW), Ok(want.clone()));
        assert_eq!(v.verify(&sign(Algorithm::RS512, "rsa-512", &keys().rsa.0, &claims()), NOW), Ok(want.clone()));
        // The same key under the kid for another algorithm: refused.
        assert_eq!(
            v.verify(&sign(Algorithm::RS256, "rsa-pss", &keys().rsa.0, &claims()), NOW),
            Err(TokenError::UnknownKey)
        );
        // Without a `kid` the key is found by its algorithm.
        let header = Header::new(Algorithm::ES256);
        let token = jsonwebtoken::encode(&header, &claims(), &keys().ec.0).unwrap();
        assert_eq!(v.verify(&token, NOW), Ok(want));
    }

    #[test]
    fn each_bad_token_is_refused_for_its_reason() {
        let v = verifier();
        let with = |key: &str, value: Json| {
            let mut c = claims();
            c[key] = value;
            c
        };
        let without = |key: &str| {
            let mut c = claims();
            c.as_object_mut().unwrap().remove(key);
            c
        };
        assert_eq!(v.verify(&rs(&with("exp", json!(NOW - 31))), NOW), Err(TokenError::Expired));
        assert!(v.verify(&rs(&with("exp", json!(NOW - 29))), NOW).is_ok(), "within the leeway");
        assert_eq!(v.verify(&rs(&without("exp")), NOW), Err(TokenError::Claim("exp".into())));
        assert_eq!(v.verify(&rs(&with("exp", json!("soon"))), NOW), Err(TokenError::Claim("exp".into())));
        assert_eq!(v.verify(&rs(&with("nbf", json!(NOW + 120))), NOW), Err(TokenError::NotYetValid));
        assert!(v.verify(&rs(&with("nbf", json!(NOW + 10))), NOW).is_ok(), "within the leeway");
        assert_eq!(v.verify(&rs(&with("aud", json!("http://other/mcp"))), NOW), Err(TokenError::Audience));
        assert!(v.verify(&rs(&with("aud", json!(["x", "http://127.0.0.1:1/mcp"]))), NOW).is_ok());
        assert_eq!(v.verify(&rs(&without("aud")), NOW), Err(TokenError::Audience));
        assert_eq!(v.verify(&rs(&with("iss", json!("https://evil.example"))), NOW), Err(TokenError::Issuer));
        assert_eq!(v.verify(&rs(&without("iss")), NOW), Err(TokenError::Issuer));
        assert_eq!(v.verify(&rs(&without("sub")), NOW), Err(TokenError::Claim("sub".into())));
        assert_eq!(v.verify(&rs(&with("scope", json!(7))), NOW), Err(TokenError::Claim("scope".into())));
        // Signed by another key under the same `kid`, or tampered with after signing.
        let forged = sign(Algorithm::RS256, "rsa-1", &keys().other_rsa, &claims());
        assert_eq!(v.verify(&forged, NOW), Err(TokenError::Signature));
        let token = rs(&claims());
        let mut parts: Vec<&str> = token.split('.').collect();
        let payload = URL_SAFE_NO_PAD.encode(with("sub", json!("agent:admin")).to_string());
        parts[1] = &payload;
        assert_eq!(v.verify(&parts.join("."), NOW), Err(TokenError::Signature));
        // An unknown key, an algorithm the key does not verify, no signature at all, a shared secret.
        assert_eq!(
            v.verify(&sign(Algorithm::RS256, "rsa-9", &keys().rsa.0, &claims()), NOW),
            Err(TokenError::UnknownKey)
        );
        assert_eq!(
            v.verify(&sign(Algorithm::RS384, "rsa-1", &keys().rsa.0, &claims()), NOW),
            Err(TokenError::UnknownKey)
        );
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims().to_string())
        );
        assert_eq!(v.verify(&none, NOW), Err(TokenError::Malformed));
        let hs =
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims(), &EncodingKey::from_secret(b"k")).unwrap();
        assert_eq!(v.verify(&hs, NOW), Err(TokenError::UnknownKey));
        assert_eq!(v.verify("not a token", NOW), Err(TokenError::Malformed));
    }

    #[test]
    fn scopes_come_from_scope_or_scp_and_claim_names_are_configurable() {
        let mut c = claims();
        c.as_object_mut().unwrap().remove("scope");
        c["scp"] = json!(["b", "a"]);
        assert_eq!(verifier().verify(&rs(&c), NOW).unwrap().scopes, ["a", "b"]);
        c.as_object_mut().unwrap().remove("scp");
        assert_eq!(verifier().verify(&rs(&c), NOW).unwrap().scopes, Vec::<String>::new());
        let k = keys();
        let mut config = JwtConfig::new(vec!["http://127.0.0.1:1/mcp".into()], vec!["https://as.example".into()]);
        config.subject_claim = "agent".into();
        config.scope_claim = Some("roles".into());
        config.credential_claim = "azp".into();
        let v = JwtVerifier::from_jwks(&json!({"keys": [k.rsa.1]}).to_string(), config).unwrap();
        let mut c = claims();
        c["agent"] = json!("agent:other");
        c["roles"] = json!("club.member");
        c["azp"] = json!("app-7");
        let identity = v.verify(&rs(&c), NOW).unwrap();
        assert_eq!(identity.subject, "agent:other");
        assert_eq!(identity.scopes, ["club.member"]);
        assert_eq!(identity.credential.as_deref(), Some("app-7"));
    }

    #[test]
    fn key_sets_without_usable_public_keys_are_refused() {
        let config = || JwtConfig::new(vec!["a".into()], vec!["i".into()]);
        let oct = json!({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "s"}]}).to_string();
        assert!(JwtVerifier::from_jwks(&oct, config()).unwrap_err().contains("shared secret"));
        assert!(JwtVerifier::from_jwks("{}", config()).unwrap_err().contains("`keys`"));
        assert!(JwtVerifier::from_jwks(r#"{"keys": []}"#, config()).unwrap_err().contains("no signature key"));
        let mut ec = keys().ec.1.clone();
        ec["alg"] = json!("RS256");
        let mismatched = json!({"keys": [ec]}).to_string();
        assert!(JwtVerifier::from_jwks(&mismatched, config()).unwrap_err().contains("does not fit"));
    }
}
