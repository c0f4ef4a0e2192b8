//! The keys of an agent that `up` starts as a harness itself (`"harness"`
//! with no `"command"`): `"prompt"`, `"model"`, `"program"` and `"args"`,
//! parsed into a [`HarnessRun`]. docs/agents.md says what they mean for
//! users.

use std::path::{Path, PathBuf};

use mosaic_domain::evidence::Harness;
use mosaic_domain::{Refusal, RoleInstance};
use serde::Deserialize;

use super::allow::Allow;
use super::error::TeamError;

/// The variable that holds the model's key when `"keyEnv"` names none:
/// the one both harnesses read for Anthropic's API.
pub const DEFAULT_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The model's endpoint when `"baseUrl"` names none: Anthropic's API.
pub const DEFAULT_MODEL_HOST: &str = "api.anthropic.com:443";

/// The longest prompt accepted, in bytes: it travels as one argument
/// (Claude Code) or one line on stdin (pi), and a configuration is at
/// most 1 MiB.
pub const MAX_PROMPT: usize = 64 * 1024;

/// An agent `up` starts as its harness: what it is told and which model
/// it talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarnessRun {
    /// The first user message (`"prompt"`).
    pub prompt: String,
    /// Where its model is (`"model"`).
    pub model: Model,
}

/// The `"model"` key: an Anthropic Messages API endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// `"baseUrl"`, when the endpoint is not Anthropic's own.
    pub base_url: Option<ModelUrl>,
    /// `"id"`, the model's name, when the harness's default is not wanted.
    pub id: Option<String>,
    /// `"keyEnv"`: the variable of `up`'s environment that holds the key,
    /// passed to this agent only ([`DEFAULT_KEY_ENV`] by default).
    pub key_env: String,
    /// The `host:port` the proxy admits for it without an `"allow"`
    /// entry: the `baseUrl`'s, else [`DEFAULT_MODEL_HOST`].
    pub endpoint: Allow,
}

impl Model {
    /// The loopback port to forward into the sandbox, for a `baseUrl` on
    /// this machine's loopback.
    pub fn loopback_port(&self) -> Option<u16> {
        self.base_url
            .as_ref()
            .and_then(|url| url.loopback.then_some(url.port))
    }
}

/// A checked `"baseUrl"`: `http://` or `https://`, a host, an optional
/// port, an optional path; no user, query or fragment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelUrl {
    /// The text as configured, given to the harness.
    pub text: String,
    /// The port, explicit or the scheme's.
    pub port: u16,
    /// The proxy's entry for it.
    pub allow: Allow,
    /// Whether the host is this machine's loopback (`localhost`,
    /// `127.0.0.0/8`, `::1`): then `sandbox-exec` forwards the port.
    pub loopback: bool,
}

impl ModelUrl {
    /// Parses `text` as the harness will (a WHATWG URL, with the `url`
    /// crate), so the proxy admits the host and port it will reach; `None`
    /// for anything but the shape above, and for whitespace, control
    /// characters or `\` anywhere in it.
    pub fn parse(text: &str) -> Option<ModelUrl> {
        if text
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
        {
            return None;
        }
        let url = url::Url::parse(text).ok()?;
        if !matches!(url.scheme(), "http" | "https")
            || !url.username().is_empty()
            || url.password().is_some()
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return None;
        }
        let port = url.port_or_known_default().filter(|&p| p != 0)?;
        let (host, loopback) = match url.host()? {
            url::Host::Domain(name) => (name.to_owned(), name == "localhost"),
            url::Host::Ipv4(v4) => (v4.to_string(), v4.is_loopback()),
            url::Host::Ipv6(v6) => (format!("[{v6}]"), v6.is_loopback()),
        };
        // `localhost` is reached as 127.0.0.1: the proxy admits a loopback
        // address only as a literal, and inside the sandbox the forward
        // listens there.
        let entry = if host == "localhost" {
            format!("127.0.0.1:{port}")
        } else {
            format!("{host}:{port}")
        };
        Some(ModelUrl {
            text: text.to_owned(),
            port,
            allow: Allow::parse(&entry)?,
            loopback,
        })
    }
}

/// The `"model"` object as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelJson {
    api: String,
    #[serde(rename = "baseUrl")]
    base_url: Option<String>,
    id: Option<String>,
    #[serde(rename = "keyEnv")]
    key_env: Option<String>,
}

/// The harness keys of one agent as written.
pub(super) struct HarnessKeys {
    pub(super) prompt: Option<String>,
    pub(super) model: Option<ModelJson>,
    pub(super) program: Option<String>,
    pub(super) args: Option<Vec<String>>,
}

impl HarnessKeys {
    /// Whether any of them is there.
    pub(super) fn any(&self) -> bool {
        self.prompt.is_some()
            || self.model.is_some()
            || self.program.is_some()
            || self.args.is_some()
    }
}

/// The harness's own program name, looked up on `PATH` without
/// `"program"`.
pub(crate) fn default_program(harness: Harness) -> &'static str {
    match harness {
        Harness::ClaudeCode => "claude",
        Harness::Pi => "pi",
    }
}

/// Parses the harness keys of `role`'s agent of `harness` without a command:
/// its program (a path with a `/` resolved against `dir`), its extra
/// arguments and its [`HarnessRun`]. `secret` holds the variables of the
/// business's service tokens, which `keyEnv` may not name.
///
/// # Errors
/// `bad-config` for a missing or empty prompt, one over [`MAX_PROMPT`]
/// (with a sentence naming the role, its size and the limit), a NUL
/// anywhere, an empty
/// argument, a `"model"` whose `api` is not `anthropic`, a `baseUrl` that
/// is not `http(s)://host[:port][/path]`, an empty `id` or one with
/// control characters, a `keyEnv` that is not a variable name or names a
/// service token's.
pub(super) fn parse(
    role: &RoleInstance,
    harness: Harness,
    keys: HarnessKeys,
    dir: &Path,
    secret: &[String],
) -> Result<(PathBuf, Vec<String>, HarnessRun), TeamError> {
    let prompt = keys.prompt.ok_or(Refusal::BadConfig)?;
    if prompt.len() > MAX_PROMPT {
        tracing::warn!(
            code = Refusal::BadConfig.code(),
            role = role.as_str(),
            bytes = prompt.len(),
            limit = MAX_PROMPT,
            "an agent's prompt is over the limit"
        );
        let why = format!(
            "the prompt of {} is {} bytes, over the limit of {MAX_PROMPT} bytes (64 KiB): \
             shorten it, and put what the agent needs besides in a file of its workdir for it \
             to read",
            role.as_str(),
            prompt.len()
        );
        let mut error = TeamError::because(Refusal::BadConfig, why);
        error.role = Some(role.clone());
        return Err(error);
    }
    if prompt.trim().is_empty() || prompt.contains('\0') {
        return Err(Refusal::BadConfig.into());
    }
    let program = match keys.program {
        Some(text) if text.is_empty() || text.contains('\0') => {
            return Err(Refusal::BadConfig.into())
        }
        Some(text) => {
            let path = PathBuf::from(text);
            if path.is_relative() && path.components().count() > 1 {
                dir.join(path)
            } else {
                path
            }
        }
        None => PathBuf::from(default_program(harness)),
    };
    let args = keys.args.unwrap_or_default();
    if args.iter().any(|w| w.is_empty() || w.contains('\0')) {
        return Err(Refusal::BadConfig.into());
    }
    let anthropic = || Allow::parse(DEFAULT_MODEL_HOST).ok_or(Refusal::BadConfig);
    let model = match keys.model {
        None => Model {
            base_url: None,
            id: None,
            key_env: DEFAULT_KEY_ENV.to_owned(),
            endpoint: anthropic()?,
        },
        Some(json) => {
            if json.api != "anthropic" {
                return Err(Refusal::BadConfig.into());
            }
            let base_url = json
                .base_url
                .map(|text| ModelUrl::parse(&text).ok_or(Refusal::BadConfig))
                .transpose()?;
            if json
                .id
                .as_ref()
                .is_some_and(|id| id.is_empty() || id.chars().any(char::is_control))
            {
                return Err(Refusal::BadConfig.into());
            }
            let key_env = json.key_env.unwrap_or_else(|| DEFAULT_KEY_ENV.to_owned());
            if !is_env_name(&key_env) || secret.contains(&key_env) {
                return Err(Refusal::BadConfig.into());
            }
            let endpoint = match &base_url {
                Some(url) => url.allow.clone(),
                None => anthropic()?,
            };
            Model {
                base_url,
                id: json.id,
                key_env,
                endpoint,
            }
        }
    };
    Ok((program, args, HarnessRun { prompt, model }))
}

/// A portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub(super) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_give_their_host_port_and_whether_to_forward() {
        for (text, allow, loopback) in [
            ("https://api.example.com", "api.example.com:443", false),
            (
                "http://models.example.com/v1",
                "models.example.com:80",
                false,
            ),
            ("http://127.0.0.1:8080", "127.0.0.1:8080", true),
            ("http://localhost:9000/anthropic", "127.0.0.1:9000", true),
            ("http://[::1]:7000", "[::1]:7000", true),
            ("http://[::1]/v1", "[::1]:80", true),
            (
                "https://[2606:4700::1111]/v1",
                "[2606:4700::1111]:443",
                false,
            ),
            ("https://10.0.0.5:8443/", "10.0.0.5:8443", false),
            ("HTTP://API.Example.com:8443", "api.example.com:8443", false),
        ] {
            let url = ModelUrl::parse(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(url.allow.to_string(), allow, "{text}");
            assert_eq!(url.loopback, loopback, "{text}");
            assert_eq!(url.text, text);
        }
        for bad in [
            "api.example.com",
            "ftp://api.example.com",
            "https://user@api.example.com",
            "https://api.example.com:0",
            "https://api.example.com:99999",
            "https://",
            "https://api.example.com/?q=1",
            "https://api.example.com/a b",
            "https://api.example.com/a\\b",
            "https://api.example.com#top",
            "https://:secret@api.example.com",
            "https://[::1",
            "https://under_score.example.com",
            "http://::1:80",
        ] {
            assert_eq!(ModelUrl::parse(bad), None, "{bad}");
        }
    }
}
