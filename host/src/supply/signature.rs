//! SSH signatures over a plugin (OpenSSH's SSHSIG format, what
//! `ssh-keygen -Y sign` writes and git uses for signed commits).
//!
//! What is signed is a short statement naming the SHA-256 of the plugin's
//! `plugin.toml` and of its component, in the namespace
//! [`NAMESPACE`] (so no signature made for git or another tool counts):
//!
//! ```text
//! sandcrab plugin v1
//! manifest sha256:…
//! component sha256:…
//! ```
//!
//! `sandcrab plugins statement DIR | ssh-keygen -Y sign -f KEY -n
//! sandcrab-plugin > DIR/plugin.sig` signs a plugin folder. Checking needs
//! nothing but the operator's `[trust.signers]`: no network, no service.

use super::signers::{Signer, Signers, fingerprint};
use crate::plugin::integrity::sha256_hex;

/// The SSHSIG namespace of a plugin signature.
pub const NAMESPACE: &str = "sandcrab-plugin";

/// The SHA-256 (hex) of a plugin's `plugin.toml` and of its component:
/// what a signature, a lock entry and a pin are about, taken once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    pub manifest: String,
    pub component: String,
}

impl Digests {
    /// The digests of these bytes.
    pub fn of(manifest: &[u8], component: &[u8]) -> Digests {
        Digests {
            manifest: sha256_hex(manifest),
            component: sha256_hex(component),
        }
    }
}

/// The text a plugin's signature is made over.
pub fn statement(digests: &Digests) -> String {
    format!(
        "sandcrab plugin v1\nmanifest sha256:{}\ncomponent sha256:{}\n",
        digests.manifest, digests.component
    )
}

/// Why a signature does not admit a plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error(
        "plugin.sig is not an SSH signature ({reason}); make it with `sandcrab plugins statement DIR | ssh-keygen -Y sign -f KEY -n {NAMESPACE}`"
    )]
    Malformed { reason: String },
    #[error(
        "plugin.sig was made in the namespace '{namespace}', not '{NAMESPACE}' (a signature for another purpose does not sign a plugin)"
    )]
    WrongNamespace { namespace: String },
    #[error(
        "signed by a key no [trust.signers] entry names ({fingerprint}); if you trust it, add its public key to [trust.signers] in your configuration"
    )]
    UnknownKey { fingerprint: String },
    #[error(
        "the signature by {signer} does not verify over this plugin's component and manifest: it was made for other files (the plugin was altered, or the signature belongs to another artifact)"
    )]
    DoesNotVerify { signer: String },
    #[error(
        "{signer} signed it, but may sign only {scope} (not '{plugin}'); widen [trust.signers] if that is meant"
    )]
    OutOfScope {
        signer: String,
        plugin: String,
        scope: String,
    },
    #[error(
        "it carries no signature, and signatures are required ([trust] require_signatures, or locked mode with signers named)"
    )]
    Unsigned,
}

impl SignatureError {
    /// Whether a plugin with this verdict may still be taken as an
    /// unsigned one where signatures are not required: it carries none,
    /// or one by a key nobody trusts (no sign it was altered). A
    /// signature that does not verify, or a signer out of its scope, is
    /// never that.
    pub fn leaves_it_unsigned(&self) -> bool {
        matches!(
            self,
            SignatureError::Unsigned | SignatureError::UnknownKey { .. }
        )
    }
}

/// [`verify`] where the plugin may carry no signature (`None`): that is
/// [`SignatureError::Unsigned`].
pub fn verify_optional<'a>(
    signature: Option<&[u8]>,
    digests: &Digests,
    name: &str,
    signers: &'a Signers,
) -> Result<&'a Signer, SignatureError> {
    match signature {
        Some(sig) => verify(sig, digests, name, signers),
        None => Err(SignatureError::Unsigned),
    }
}

/// Check `signature` (the bytes of `plugin.sig`) over the plugin `name`
/// whose manifest and component have these digests. `Ok(signer)` names
/// who signed it.
pub fn verify<'a>(
    signature: &[u8],
    digests: &Digests,
    name: &str,
    signers: &'a Signers,
) -> Result<&'a Signer, SignatureError> {
    let text = std::str::from_utf8(signature).map_err(|_| SignatureError::Malformed {
        reason: "not text".into(),
    })?;
    let sig = ssh_key::SshSig::from_pem(text.trim()).map_err(|e| SignatureError::Malformed {
        reason: e.to_string(),
    })?;
    if sig.namespace() != NAMESPACE {
        return Err(SignatureError::WrongNamespace {
            namespace: sig.namespace().to_string(),
        });
    }
    let signer = signers
        .by_key(sig.public_key())
        .ok_or_else(|| SignatureError::UnknownKey {
            fingerprint: fingerprint(sig.public_key()),
        })?;
    signer
        .key
        .verify(NAMESPACE, statement(digests).as_bytes(), &sig)
        .map_err(|_| SignatureError::DoesNotVerify {
            signer: signer.label(),
        })?;
    if !signer.may_sign(name) {
        return Err(SignatureError::OutOfScope {
            signer: signer.label(),
            plugin: name.to_string(),
            scope: signer.plugins.join(", "),
        });
    }
    Ok(signer)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::supply::signers::SignerToml;

    fn key(seed: u8) -> ssh_key::PrivateKey {
        ssh_key::PrivateKey::from(ssh_key::private::Ed25519Keypair::from_seed(&[seed; 32]))
    }

    fn sign(key: &ssh_key::PrivateKey, namespace: &str, text: &str) -> Vec<u8> {
        key.sign(namespace, ssh_key::HashAlg::Sha512, text.as_bytes())
            .unwrap()
            .to_pem(ssh_key::LineEnding::LF)
            .unwrap()
            .into_bytes()
    }

    fn trusting(key: &ssh_key::PrivateKey, plugins: &[&str]) -> Signers {
        Signers::from_toml(&BTreeMap::from([(
            "acme".to_string(),
            SignerToml {
                key: key.public_key().to_openssh().unwrap(),
                plugins: plugins.iter().map(|p| p.to_string()).collect(),
            },
        )]))
        .unwrap()
    }

    #[test]
    fn a_signature_admits_exactly_the_files_it_was_made_over() {
        let key = key(1);
        let signers = trusting(&key, &["hello"]);
        let sig = sign(&key, NAMESPACE, &statement(&Digests::of(b"m", b"c")));
        let signer = verify(&sig, &Digests::of(b"m", b"c"), "hello", &signers).unwrap();
        assert_eq!(signer.name, "acme");
        for (m, c) in [(&b"m2"[..], &b"c"[..]), (b"m", b"c2")] {
            assert!(matches!(
                verify(&sig, &Digests::of(m, c), "hello", &signers),
                Err(SignatureError::DoesNotVerify { .. })
            ));
        }
        assert!(matches!(
            verify(&sig, &Digests::of(b"m", b"c"), "other", &signers),
            Err(SignatureError::OutOfScope { .. })
        ));
        let git = sign(&key, "git", &statement(&Digests::of(b"m", b"c")));
        assert!(matches!(
            verify(&git, &Digests::of(b"m", b"c"), "hello", &signers),
            Err(SignatureError::WrongNamespace { .. })
        ));
        let stranger = sign(
            &self::key(2),
            NAMESPACE,
            &statement(&Digests::of(b"m", b"c")),
        );
        assert!(matches!(
            verify(&stranger, &Digests::of(b"m", b"c"), "hello", &signers),
            Err(SignatureError::UnknownKey { .. })
        ));
        assert!(matches!(
            verify(b"garbage", &Digests::of(b"m", b"c"), "hello", &signers),
            Err(SignatureError::Malformed { .. })
        ));
    }
}
