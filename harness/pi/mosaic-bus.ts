// The pi extension of mosaic-bus: the broker's agent verbs as pi tools,
// and the agent's loop. `mosaic-bus up` writes it into a pi run's folder
// and runs `pi --mode rpc --no-session -e <run>/mosaic-bus.ts`; pi loads
// TypeScript itself, so there is no build step. See docs/agents.md, "pi".
//
// - Tools: at load it runs `mosaic-bus mcp --tools` once, the list the MCP
//   server answers to `tools/list`, and registers one pi tool per agent
//   verb with the same name (dots as underscores: role_claim), description
//   and JSON schema. A call runs `mosaic-bus call VERB ARGS_JSON`, which
//   reads the capability itself (MOSAIC_BUS_CAP_FD, or the private file
//   MOSAIC_BUS_CAP_FILE); a refusal is a tool error whose text starts with
//   its static code.
// - The loop: at `agent_end` it waits on `changes`, from the cursor at
//   launch (MOSAIC_BUS_SINCE: when `up` starts pi again in the same run,
//   the cursor after what it gave as the prompt) at first and then from
//   the cursor it reached, up to MOSAIC_HOOK_WAIT_MS (again and again with
//   MOSAIC_BUS_IDLE=wait). When something concerning the agent arrived,
//   it sends the list as a follow-up user message, saying which tool to
//   call, as the Claude Code Stop hook does; when nothing arrived, or the
//   agent no longer holds its role (it released it: `not-holder`), it
//   ends the session and pi exits 0; after any other refusal, 1, and
//   after a turn that ended in a model error (its last assistant message's
//   `stopReason` is `error`), 1 with the model's error line on stderr
//   (`mosaic-bus pi extension: model-error: …`). In `pi -p` the runtime is disposed before such a follow-up
//   runs: use `--mode rpc`.
//
// Environment:
//   MOSAIC_BUS_BIN       the mosaic-bus executable (default: mosaic-bus on
//                        PATH)
//   MOSAIC_BUS_SOCKET    the broker's socket (read by mosaic-bus itself)
//   MOSAIC_BUS_CAP_FD / MOSAIC_BUS_CAP_FILE  the capability (read by
//                        mosaic-bus itself)
//   MOSAIC_BUS_SINCE     the feed's cursor at launch (set by `mosaic-bus
//                        up`); without it the first stop takes the current
//                        cursor and reads the inbox once
//   MOSAIC_HOOK_WAIT_MS  how long one wait for a change lasts (default
//                        60000; the broker clamps it to 1000..120000)
//   MOSAIC_BUS_IDLE      `exit` (the default): when nothing arrived within
//                        one wait, the session ends and pi exits 0, and
//                        `mosaic-bus up` starts it again, its session
//                        continued, when work arrives; `wait`: wait again,
//                        with no cap, until something arrives
//
// When the first stop finds the inbox holding anything, the extension also
// takes what the feed holds after its cursor and moves the cursor past it,
// so the next stop does not wake the agent again for an open decision it
// was already told of.
//
// Failures are written to stderr as `mosaic-bus pi extension: CODE`, never
// with a capability.

import { execFile, execFileSync } from "node:child_process";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const BIN = process.env.MOSAIC_BUS_BIN || "mosaic-bus";

/// A tool as `mosaic-bus mcp --tools` prints it.
interface Listed {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/// The broker's answer line.
type Answer = { ok: true; result: any } | { ok: false; error: string };

function complain(code: string): void {
  process.stderr.write(`mosaic-bus pi extension: ${code}\n`);
}

/// The error the agent's last assistant message ended in (its
/// `stopReason` is `error`), or undefined when it ended well.
function modelError(event: any): string | undefined {
  const messages: any[] = Array.isArray(event?.messages) ? event.messages : [];
  const last = [...messages].reverse().find((m) => m?.role === "assistant");
  if (last?.stopReason !== "error") return undefined;
  const text = typeof last.errorMessage === "string" ? last.errorMessage : "the model failed";
  // One line: the error as the harness said it.
  return text.split("\n")[0];
}

/// A number of digits without a leading zero, or undefined.
function cursorFrom(text: string | undefined): number | undefined {
  return text !== undefined && /^(0|[1-9][0-9]*)$/.test(text) ? Number(text) : undefined;
}

/// One request to the broker through `mosaic-bus call`: its answer line,
/// or the static code `call` printed when it could not ask (its last
/// line of stderr).
function call(verb: string, args: object, signal?: AbortSignal): Promise<Answer> {
  return new Promise((resolve) => {
    execFile(
      BIN,
      ["call", verb, JSON.stringify(args)],
      { signal, maxBuffer: 8 * 1024 * 1024 },
      (_error, stdout, stderr) => {
        try {
          const answer = JSON.parse(String(stdout).trim().split("\n").pop() || "");
          if (answer && typeof answer.ok === "boolean") return resolve(answer);
        } catch {
          // Not an answer line: the code is on stderr.
        }
        const code = /[a-z-]+/.exec(String(stderr).trim().split("\n").pop() || "");
        resolve({ ok: false, error: code ? code[0] : "outcome-unknown" });
      },
    );
  });
}

/// The tool a change points to, as the Stop hook words it.
function hint(kind: string): string {
  if (kind === "message.sent") {
    return "message_receive takes delivery of your new messages (then message_read each one);";
  }
  if (kind === "decision.raised" || kind === "decision.superseded") {
    return "inbox lists the open decisions routed to you;";
  }
  if (kind.startsWith("decision.")) {
    return "trail with the decision id as subject shows what happened to it;";
  }
  if (kind.startsWith("role.")) return "trail with your role as subject shows who holds it now;";
  return "inbox shows what is open for you;";
}

/// The follow-up for the changes that arrived: each with its kind and the
/// id it points at, then which tools to call.
function followUp(changes: any[]): string {
  const list = changes
    .map((c) => [c.kind, c.message ?? c.decision ?? c.role ?? c.task].filter(Boolean).join(" "))
    .join("; ");
  const tools = [...new Set(changes.map((c) => hint(String(c.kind))))].join(" ");
  return `mosaic-bus: work arrived: ${list}. Call the mosaic-bus tools: ${tools} then carry on. When you stop again, the extension waits for more.`;
}

export default function (pi: ExtensionAPI) {
  // The same list the MCP server answers, from the same binary.
  const listed: Listed[] = JSON.parse(
    execFileSync(BIN, ["mcp", "--tools"], { encoding: "utf8" }),
  );
  for (const tool of listed) {
    // The MCP name is the verb with underscores for its dots.
    const verb = tool.name.replace(/_/g, ".");
    pi.registerTool({
      name: tool.name,
      label: tool.name,
      description: tool.description,
      parameters: tool.inputSchema as any,
      async execute(_id: string, params: any, signal?: AbortSignal) {
        const answer = await call(verb, params ?? {}, signal);
        if (!answer.ok) {
          const advice =
            answer.error === "outcome-unknown"
              ? " The request may have taken effect: inspect the trail before doing it again."
              : "";
          throw new Error(`${answer.error}: mosaic-bus refused ${tool.name}.${advice}`);
        }
        return {
          content: [{ type: "text" as const, text: JSON.stringify(answer.result) }],
          details: {},
        };
      },
    });
  }

  const waitMs = cursorFrom(process.env.MOSAIC_HOOK_WAIT_MS) ?? 60000;
  const idle = process.env.MOSAIC_BUS_IDLE ?? "exit";
  let since = cursorFrom(process.env.MOSAIC_BUS_SINCE);

  pi.on("agent_end", async (event, ctx) => {
    // A turn that ended in a model error (a dropped stream, retries spent)
    // is a failure, not a finished session: pi's own exit would say 0.
    const failed = modelError(event);
    if (failed !== undefined) return stop("model-error", failed);
    if (since === undefined) {
      // No cursor from the launch: the current one, then the inbox once
      // for what came before it.
      const now = await call("changes", {});
      if (!now.ok) return stop(now.error);
      since = Number(now.result.cursor);
      const inbox = await call("inbox", {});
      if (!inbox.ok) return stop(inbox.error);
      const items: any[] = Array.isArray(inbox.result) ? inbox.result : (inbox.result?.items ?? []);
      if (items.length > 0) {
        // What the inbox holds may also lie after the cursor: taken now
        // (the feed answers at once when it holds anything) and passed.
        const held = await call("changes", { since, timeoutMs: 1000 });
        if (!held.ok) return stop(held.error);
        since = Number(held.result.cursor);
        const also: any[] = held.result.changes ?? [];
        const more = also.length > 0 ? ` ${followUp(also)}` : "";
        pi.sendUserMessage(
          `mosaic-bus: your inbox holds ${items.length} item(s). Call the mosaic-bus tools: inbox lists them; message_receive takes delivery of new messages (then message_read each one); then carry on.${more}`,
          { deliverAs: "followUp" },
        );
        return;
      }
    }
    if (idle !== "exit" && idle !== "wait") return stop("bad-request");
    for (;;) {
      const answer = await call("changes", { since, timeoutMs: waitMs });
      // The agent released its role: nothing can concern its run any more,
      // and that is a finished session, not a failure.
      if (!answer.ok && answer.error === "not-holder") return stop(undefined);
      if (!answer.ok) return stop(answer.error);
      since = Number(answer.result.cursor);
      const changes: any[] = answer.result.changes ?? [];
      if (changes.length > 0) {
        pi.sendUserMessage(followUp(changes), { deliverAs: "followUp" });
        return;
      }
      if (idle === "exit") return stop(undefined);
    }

    /// Ends the session: nothing arrived within the wait (exit 0), or the
    /// broker refused or the model failed (`code`, exit 1), with the
    /// model's own error line when there is one.
    function stop(code: string | undefined, error?: string): void {
      if (code !== undefined) complain(error === undefined ? code : `${code}: ${error}`);
      ctx.shutdown();
      // In RPC mode pi acts on a shutdown request only after its next
      // command, and none comes: the prompt was answered long ago. So the
      // extension exits itself, in a later task, once pi has written this
      // agent_end event (it does so as soon as this handler settles).
      setTimeout(() => process.exit(code === undefined ? 0 : 1), 0);
    }
  });
}
