// acpctl's permission gate for pi (loaded with `pi --extension`): asks before write, edit
// and bash tool calls through pi's extension UI. acpctl turns the confirm dialog into an
// ACP session/request_permission; the [acpctl:<id>] mark ties it to the tool call.
// Turn it off with ACPCTL_NO_PERMISSION_GATE=1.
const GATED = ["write", "edit", "bash"];

export default function (pi: any) {
  pi.on("tool_call", async (event: any, ctx: any) => {
    if (!GATED.includes(event.toolName)) return;
    const subject = event.toolName === "bash" ? event.input?.command : event.input?.path;
    const allowed = await ctx.ui.confirm(
      `Allow ${event.toolName}?`,
      `${event.toolName} ${subject ?? ""} [acpctl:${event.toolCallId}]`,
    );
    if (!allowed) return { block: true, reason: "The user denied this tool call." };
  });
}
