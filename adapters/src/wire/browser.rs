//! Browser control's JSON (docs/browser.md): the `browser.request` verb's
//! arguments, the pane routes' bodies and the SSE events. Shapes only; the
//! server and the request machine's driving loop are the app's.

use mosaic_domain::browser::{
    BrowserAction, CaptureLabel, ClickTarget, ClickText, HttpUrl, InputValue, PaneOutcome,
    ScrollDirection, ScrollTarget, Selector, Viewport,
};
use mosaic_domain::{BrowserRequestId, ClaimToken, ClientId, DecisionId, Refusal, Timestamp};
use serde_json::{json, Map, Value};

use super::parse_json;

/// The claim route's body limit.
pub const MAX_CLAIM_BODY: usize = 4 * 1024;
/// The result route's body limit (a snapshot or a capture).
pub const MAX_RESULT_BODY: usize = 16 * 1024 * 1024;
/// The pane's follow-up error after its result was refused as too large.
pub const TOO_LARGE_ERROR: &str = Refusal::BrowserResultTooLarge.code();
/// The pane's error when it refused a navigation to a private address.
pub const ADDRESS_REFUSED_ERROR: &str = Refusal::BrowserAddressRefused.code();

/// `browser.request {action, parameters, timeoutMs?, decision?}`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserCall {
    /// The action with validated parameters.
    pub action: BrowserAction,
    /// The agent's timeout, before the 1–120 s clamp.
    pub timeout_ms: Option<u64>,
    /// The decision approving `browser.<action>`, when authority does not.
    pub decision: Option<DecisionId>,
}

/// Parses the verb's arguments (their keys were already checked).
///
/// # Errors
/// `unknown-action` for an action that is not one of the ten;
/// `bad-parameters` for parameters that break its rules (an unknown key
/// included); `bad-request` for a `timeoutMs` that is not a positive integer
/// or a malformed `decision`.
pub fn browser_call(mut args: Map<String, Value>) -> Result<BrowserCall, Refusal> {
    let Some(Value::String(name)) = args.remove("action") else {
        return Err(Refusal::BadRequest);
    };
    let parameters = match args.remove("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(Refusal::BadParameters),
    };
    let timeout_ms = match args.remove("timeoutMs") {
        None | Some(Value::Null) => None,
        Some(value) => Some(value.as_u64().ok_or(Refusal::BadRequest)?),
    };
    let decision = match args.remove("decision") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(DecisionId::parse(&id)?),
        Some(_) => return Err(Refusal::BadRequest),
    };
    Ok(BrowserCall {
        action: browser_action(&name, parameters)?,
        timeout_ms,
        decision,
    })
}

/// Builds one of the ten actions from its wire name and parameters.
///
/// # Errors
/// `unknown-action` for any other name, `bad-parameters` for anything the
/// action's rules refuse.
pub fn browser_action(
    name: &str,
    parameters: Map<String, Value>,
) -> Result<BrowserAction, Refusal> {
    let allowed: &[&str] = match name {
        "open" => &["url", "viewport"],
        "snapshot" => &["selector"],
        "click" => &["selector", "text"],
        "type" => &["selector", "value", "submit"],
        "scroll" => &["direction", "selector"],
        "back" | "forward" => &[],
        "inspect" => &["selector"],
        "capture" => &["label"],
        "resize" => &["viewport"],
        _ => return Err(Refusal::UnknownAction),
    };
    if parameters.keys().any(|k| !allowed.contains(&k.as_str())) {
        return Err(Refusal::BadParameters);
    }
    let mut p = Params(parameters);
    let action = match name {
        "open" => BrowserAction::Open {
            url: HttpUrl::parse(&p.text("url")?)?,
            viewport: p.viewport()?,
        },
        "snapshot" => BrowserAction::Snapshot {
            selector: p
                .opt_text("selector")?
                .map(|s| Selector::parse(&s))
                .transpose()?,
        },
        "click" => match (p.opt_text("selector")?, p.opt_text("text")?) {
            (Some(selector), None) => {
                BrowserAction::Click(ClickTarget::Selector(Selector::parse(&selector)?))
            }
            (None, Some(text)) => BrowserAction::Click(ClickTarget::Text(ClickText::parse(&text)?)),
            (Some(_), Some(_)) | (None, None) => return Err(Refusal::BadParameters),
        },
        "type" => BrowserAction::Type {
            selector: Selector::parse(&p.text("selector")?)?,
            value: InputValue::parse(&p.text("value")?)?,
            submit: p.flag("submit")?,
        },
        "scroll" => match (p.opt_text("direction")?, p.opt_text("selector")?) {
            (Some(direction), None) => {
                BrowserAction::Scroll(ScrollTarget::Direction(ScrollDirection::parse(&direction)?))
            }
            (None, Some(selector)) => {
                BrowserAction::Scroll(ScrollTarget::Selector(Selector::parse(&selector)?))
            }
            (Some(_), Some(_)) | (None, None) => return Err(Refusal::BadParameters),
        },
        "back" => BrowserAction::Back,
        "forward" => BrowserAction::Forward,
        "inspect" => BrowserAction::Inspect {
            selector: Selector::parse(&p.text("selector")?)?,
        },
        "capture" => BrowserAction::Capture {
            label: p
                .opt_text("label")?
                .map(|l| CaptureLabel::parse(&l))
                .transpose()?,
        },
        "resize" => BrowserAction::Resize {
            viewport: p.viewport()?.ok_or(Refusal::BadParameters)?,
        },
        // Refused by the allow-list above already; named here so no
        // unknown name can fall into a real action.
        _ => return Err(Refusal::UnknownAction),
    };
    Ok(action)
}

/// An action's parameters as the pane receives them.
pub fn action_parameters(action: &BrowserAction) -> Value {
    let viewport = |v: &Viewport| json!({"width": v.width(), "height": v.height()});
    match action {
        BrowserAction::Open { url, viewport: v } => match v {
            Some(v) => json!({"url": url.as_str(), "viewport": viewport(v)}),
            None => json!({"url": url.as_str()}),
        },
        BrowserAction::Snapshot { selector } => match selector {
            Some(s) => json!({"selector": s.as_str()}),
            None => json!({}),
        },
        BrowserAction::Click(ClickTarget::Selector(s)) => json!({"selector": s.as_str()}),
        BrowserAction::Click(ClickTarget::Text(t)) => json!({"text": t.as_str()}),
        BrowserAction::Type {
            selector,
            value,
            submit,
        } => json!({"selector": selector.as_str(), "value": value.as_str(), "submit": submit}),
        BrowserAction::Scroll(ScrollTarget::Direction(d)) => json!({"direction": d.as_str()}),
        BrowserAction::Scroll(ScrollTarget::Selector(s)) => json!({"selector": s.as_str()}),
        BrowserAction::Back | BrowserAction::Forward => json!({}),
        BrowserAction::Inspect { selector } => json!({"selector": selector.as_str()}),
        BrowserAction::Capture { label } => match label {
            Some(l) => json!({"label": l.as_str()}),
            None => json!({}),
        },
        BrowserAction::Resize { viewport: v } => json!({"viewport": viewport(v)}),
    }
}

/// An SSE event's data line: `{"type":…,"properties":{…}}`.
fn event(kind: &str, properties: Value) -> String {
    json!({"type": kind, "properties": properties}).to_string()
}

/// `browser-control-request {requestId, action, parameters, claimBy}`.
pub fn request_event(id: &BrowserRequestId, action: &BrowserAction, claim_by: Timestamp) -> String {
    event(
        "browser-control-request",
        json!({
            "requestId": id.to_string(),
            "action": action.name(),
            "parameters": action_parameters(action),
            "claimBy": claim_by.to_string(),
        }),
    )
}

/// `browser-control-cancel {requestId}`.
pub fn cancel_event(id: &BrowserRequestId) -> String {
    event(
        "browser-control-cancel",
        json!({"requestId": id.to_string()}),
    )
}

/// `heartbeat {}`.
pub fn heartbeat_event() -> String {
    event("heartbeat", json!({}))
}

/// A claim body, `{requestId, clientId}`: the request and the client,
/// or `None` when either is a string of another form than the broker's
/// (a request id it issues, a client id it accepts). No request was
/// delivered to such a client or has such an id, so the route answers
/// `{granted:false}`, as for an unknown request, not 400.
///
/// # Errors
/// `bad-request` only for a body that is not a JSON object with exactly
/// these two keys, both strings.
pub fn claim_body(body: &[u8]) -> Result<Option<(BrowserRequestId, ClientId)>, Refusal> {
    let mut map = object(body, &["requestId", "clientId"])?;
    let id = text(&mut map, "requestId")?;
    let client = text(&mut map, "clientId")?;
    Ok(BrowserRequestId::parse(&id)
        .ok()
        .zip(ClientId::parse(&client).ok()))
}

/// A result body, `{requestId, claimToken, ok, data?, error?}`.
#[derive(Debug)]
pub struct ResultBody {
    /// The request and the claim token the pane received, or `None` when
    /// either is a string of another form than the broker's (say
    /// `"forged"`): it names no request or is no token the broker issued,
    /// so the route answers `{matched:false}` without asking the machine.
    pub claim: Option<(BrowserRequestId, ClaimToken)>,
    /// What the pane reports, decided by `ok` alone: `ok:true` is
    /// [`PaneOutcome::Done`] with `data` (an `error` beside it is
    /// ignored); `ok:false` is [`PaneOutcome::TooLarge`] when `error` is
    /// [`TOO_LARGE_ERROR`], [`PaneOutcome::AddressRefused`] when it is
    /// [`ADDRESS_REFUSED_ERROR`] and [`PaneOutcome::Failed`] otherwise
    /// (the error's text is not kept, and `data` beside it is ignored).
    pub outcome: PaneOutcome<Value>,
}

/// Parses a result body.
///
/// `data` is optional: an `ok:true` result without it is
/// [`PaneOutcome::Done`] with JSON `null`, exactly as if the pane had sent
/// `"data": null`, and the agent's result is `null`. Actions such as
/// `back` or `click` have nothing to report but that they were done; the
/// browser machine settles every `Done` the same way, whatever it holds.
/// `error` is optional too: `ok:false` without it is a plain failure.
///
/// # Errors
/// `bad-request` only for a body that is not a JSON object of these keys
/// (an unknown key is refused) with the required `requestId` and
/// `claimToken` as strings and `ok` as a boolean, and `error`, when
/// present, a string. An id or token of another form is not an error (see
/// [`ResultBody::claim`]).
pub fn result_body(body: &[u8]) -> Result<ResultBody, Refusal> {
    let mut map = object(body, &["requestId", "claimToken", "ok", "data", "error"])?;
    let request = text(&mut map, "requestId")?;
    let token = text(&mut map, "claimToken")?;
    let Some(Value::Bool(ok)) = map.remove("ok") else {
        return Err(Refusal::BadRequest);
    };
    let data = map.remove("data");
    let error = match map.remove("error") {
        None => None,
        Some(Value::String(error)) => Some(error),
        Some(_) => return Err(Refusal::BadRequest),
    };
    let outcome = if ok {
        PaneOutcome::Done(data.unwrap_or(Value::Null))
    } else if error.as_deref() == Some(TOO_LARGE_ERROR) {
        PaneOutcome::TooLarge
    } else if error.as_deref() == Some(ADDRESS_REFUSED_ERROR) {
        PaneOutcome::AddressRefused
    } else {
        PaneOutcome::Failed
    };
    Ok(ResultBody {
        claim: BrowserRequestId::parse(&request)
            .ok()
            .zip(ClaimToken::parse(&token).ok()),
        outcome,
    })
}

/// A JSON object body with only `keys`.
fn object(body: &[u8], keys: &[&str]) -> Result<Map<String, Value>, Refusal> {
    let Value::Object(map) = parse_json(body)? else {
        return Err(Refusal::BadRequest);
    };
    if map.keys().any(|k| !keys.contains(&k.as_str())) {
        return Err(Refusal::BadRequest);
    }
    Ok(map)
}

fn text(map: &mut Map<String, Value>, key: &str) -> Result<String, Refusal> {
    match map.remove(key) {
        Some(Value::String(text)) => Ok(text),
        _ => Err(Refusal::BadRequest),
    }
}

/// Action parameters whose keys were already checked; every wrong type is
/// `bad-parameters`.
struct Params(Map<String, Value>);

impl Params {
    fn opt_text(&mut self, key: &str) -> Result<Option<String>, Refusal> {
        match self.0.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(Refusal::BadParameters),
        }
    }

    fn text(&mut self, key: &str) -> Result<String, Refusal> {
        self.opt_text(key)?.ok_or(Refusal::BadParameters)
    }

    fn flag(&mut self, key: &str) -> Result<bool, Refusal> {
        match self.0.remove(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(flag)) => Ok(flag),
            Some(_) => Err(Refusal::BadParameters),
        }
    }

    fn viewport(&mut self) -> Result<Option<Viewport>, Refusal> {
        match self.0.remove("viewport") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(v)) if v.len() == 2 => {
                let side = |key| {
                    v.get(key)
                        .and_then(Value::as_u64)
                        .ok_or(Refusal::BadParameters)
                };
                Ok(Some(Viewport::new(side("width")?, side("height")?)?))
            }
            Some(_) => Err(Refusal::BadParameters),
        }
    }
}

/// The HTTP status class a browser refusal stands for, so an agent can tell
/// "nobody there" (503) from "too slow" (504) from "refused" (4xx).
pub fn status_class(refusal: Refusal) -> u16 {
    if refusal == Refusal::NoBrowserClient || refusal == Refusal::StorageUnavailable {
        503
    } else if refusal == Refusal::BrowserTimeout {
        504
    } else if refusal == Refusal::BrowserAborted {
        499
    } else if refusal == Refusal::BrowserResultTooLarge {
        413
    } else if refusal == Refusal::BrowserFailed {
        502
    } else if matches!(
        refusal,
        Refusal::NotAuthorized
            | Refusal::BrowserAddressRefused
            | Refusal::NotHolder
            | Refusal::BadCapability
            | Refusal::DecisionConsumed
            | Refusal::DecisionMismatch
            | Refusal::DecisionOpen
            | Refusal::RunRevoked
            | Refusal::RunEnded
    ) {
        403
    } else {
        400
    }
}

/// A refused `browser.request`: `{"ok":false,"error":CODE,"status":N}`,
/// plus a `message` sentence where one helps (who is connected, for
/// `no-browser-client`).
pub fn error_response(refusal: Refusal, message: Option<String>) -> String {
    let mut value = json!({"ok": false, "error": refusal.code(), "status": status_class(refusal)});
    if let Some(message) = message {
        value["message"] = message.into();
    }
    value.to_string()
}

/// The claim route's answer: `{granted:true, claimToken}` or
/// `{granted:false}`.
pub fn claim_reply(token: Option<&str>) -> Value {
    match token {
        Some(token) => json!({"granted": true, "claimToken": token}),
        None => json!({"granted": false}),
    }
}

/// The result route's answer: `{matched}`.
pub fn result_reply(matched: bool) -> Value {
    json!({"matched": matched})
}

/// The body of a `browser.completed` observation: what was asked and how
/// it ended, with the size and SHA-256 (`digest`) of the agent's answer,
/// never the payload.
pub fn completed_body(
    action: &BrowserAction,
    request: Option<&BrowserRequestId>,
    refusal: Option<Refusal>,
    bytes: usize,
    digest: &str,
) -> Value {
    let mut body = json!({
        "action": action.name(),
        "ok": refusal.is_none(),
        "bytes": bytes,
        "sha256": digest,
    });
    if let Some(request) = request {
        body["request"] = request.to_string().into();
    }
    if let Some(refusal) = refusal {
        body["code"] = refusal.code().into();
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn every_action_parses_and_prints_its_parameters_back() {
        let cases = [
            (
                "open",
                json!({"url": "https://example.com/a?b=1", "viewport": {"width": 800, "height": 600}}),
            ),
            (
                "open",
                json!({"url": "http://127.0.0.1:7420/fixtures/index.html"}),
            ),
            ("snapshot", json!({})),
            ("snapshot", json!({"selector": "#main"})),
            ("click", json!({"selector": "#go"})),
            ("click", json!({"text": "Sign in"})),
            (
                "type",
                json!({"selector": "#name", "value": "Ada", "submit": true}),
            ),
            ("scroll", json!({"direction": "bottom"})),
            ("scroll", json!({"selector": "#end"})),
            ("back", json!({})),
            ("forward", json!({})),
            ("inspect", json!({"selector": "button"})),
            ("capture", json!({"label": "after"})),
            ("resize", json!({"viewport": {"width": 1, "height": 10000}})),
        ];
        for (name, p) in cases {
            let action = browser_action(name, params(p.clone()))
                .unwrap_or_else(|r| panic!("{name} {p}: {r}"));
            assert_eq!(action.name(), name);
            let mut expected = p;
            if name == "type" || expected.get("submit").is_some() {
                expected["submit"] = expected.get("submit").cloned().unwrap_or(json!(false));
            }
            assert_eq!(action_parameters(&action), expected, "{name}");
        }
    }

    #[test]
    fn bad_actions_and_parameters_refuse_before_anything_is_emitted() {
        let refused = |name: &str, p: Value| browser_action(name, params(p)).err();
        assert_eq!(refused("eval", json!({})), Some(Refusal::UnknownAction));
        assert_eq!(
            refused("open", json!({"url": "javascript:alert(1)"})),
            Some(Refusal::BadParameters)
        );
        assert_eq!(
            refused("open", json!({"url": "file:///etc/passwd"})),
            Some(Refusal::BadParameters)
        );
        assert_eq!(
            refused("open", json!({"url": "https://a.b", "script": "x"})),
            Some(Refusal::BadParameters)
        );
        assert_eq!(refused("click", json!({})), Some(Refusal::BadParameters));
        assert_eq!(
            refused("click", json!({"selector": "a", "text": "b"})),
            Some(Refusal::BadParameters)
        );
        assert_eq!(
            refused("scroll", json!({"direction": "sideways"})),
            Some(Refusal::BadParameters)
        );
        assert_eq!(refused("resize", json!({})), Some(Refusal::BadParameters));
        assert_eq!(
            refused("resize", json!({"viewport": {"width": 0, "height": 5}})),
            Some(Refusal::BadParameters)
        );
        assert_eq!(
            refused("type", json!({"selector": "#a", "value": 5})),
            Some(Refusal::BadParameters)
        );
        assert_eq!(
            refused("back", json!({"steps": 2})),
            Some(Refusal::BadParameters)
        );
    }

    #[test]
    fn claim_and_result_bodies_are_strict() {
        let id = "0b5f2c1e-3a4d-4e6f-8a9b-0c1d2e3f4a5b";
        let token = "ab".repeat(32);
        let claim = format!(r#"{{"requestId":"{id}","clientId":"pane-1"}}"#);
        let (request, client) = claim_body(claim.as_bytes())
            .expect("claim")
            .expect("addressed");
        assert_eq!(
            (request.to_string().as_str(), client.as_str()),
            (id, "pane-1")
        );
        assert!(matches!(
            claim_body(br#"{"requestId":"x","clientId":"p"}"#),
            Ok(None)
        ));
        let extra = format!(r#"{{"requestId":"{id}","clientId":"p","x":1}}"#);
        assert_eq!(
            claim_body(extra.as_bytes()).err(),
            Some(Refusal::BadRequest)
        );

        let ok = format!(
            r#"{{"requestId":"{id}","claimToken":"{token}","ok":true,"data":{{"title":"t"}}}}"#
        );
        let body = result_body(ok.as_bytes()).expect("result");
        assert_eq!(body.outcome, PaneOutcome::Done(json!({"title": "t"})));
        let (request, held) = body.claim.expect("addressed");
        assert_eq!(request.to_string(), id);
        assert_eq!(held.expose(), token);
        let big = format!(
            r#"{{"requestId":"{id}","claimToken":"{token}","ok":false,"error":"browser-result-too-large"}}"#
        );
        assert_eq!(
            result_body(big.as_bytes()).expect("result").outcome,
            PaneOutcome::TooLarge
        );
        let refused = format!(
            r#"{{"requestId":"{id}","claimToken":"{token}","ok":false,"error":"browser-address-refused"}}"#
        );
        assert_eq!(
            result_body(refused.as_bytes()).expect("result").outcome,
            PaneOutcome::AddressRefused
        );
        let failed = format!(
            r#"{{"requestId":"{id}","claimToken":"{token}","ok":false,"error":"element-not-found"}}"#
        );
        assert_eq!(
            result_body(failed.as_bytes()).expect("result").outcome,
            PaneOutcome::Failed
        );
        let bare = format!(r#"{{"requestId":"{id}","claimToken":"{token}","ok":true}}"#);
        assert_eq!(
            result_body(bare.as_bytes()).expect("result").outcome,
            PaneOutcome::Done(Value::Null)
        );
        let short = format!(r#"{{"requestId":"{id}","claimToken":"ab","ok":true,"data":1}}"#);
        assert!(result_body(short.as_bytes())
            .expect("result")
            .claim
            .is_none());
        let untyped = format!(r#"{{"requestId":"{id}","claimToken":"{token}","ok":"yes"}}"#);
        assert_eq!(
            result_body(untyped.as_bytes()).err(),
            Some(Refusal::BadRequest)
        );
    }

    #[test]
    fn events_have_the_fixed_shape() {
        let id = BrowserRequestId::parse("0b5f2c1e-3a4d-4e6f-8a9b-0c1d2e3f4a5b").expect("id");
        let at = Timestamp::parse("2026-11-30T10:00:00.000Z").expect("time");
        let event: Value =
            serde_json::from_str(&request_event(&id, &BrowserAction::Back, at)).expect("json");
        assert_eq!(
            event,
            json!({"type": "browser-control-request", "properties": {
                "requestId": id.to_string(), "action": "back", "parameters": {}, "claimBy": "2026-11-30T10:00:00.000Z"}})
        );
        let cancel: Value = serde_json::from_str(&cancel_event(&id)).expect("json");
        assert_eq!(cancel["properties"]["requestId"], json!(id.to_string()));
        assert_eq!(
            serde_json::from_str::<Value>(&heartbeat_event()).expect("json"),
            json!({"type": "heartbeat", "properties": {}})
        );
    }
}
