// A client written with the official TypeScript SDK v2 (@modelcontextprotocol/client): the
// peer mrtr's servers are tested against. The same cases as ../peers/sdk_client.py, through
// the SDK's automatic input_required loop (its elicitation, sampling and roots handlers
// answer), on the 2026-07-28 revision (pinned: no fallback to the 2025 handshake); then a
// notification (the Python SDK's client drops a refused one without a word, so only this
// peer can tell).
//
//   node client.mjs http URL
//   node client.mjs stdio COMMAND [ARG ...]     (launches the server itself)
//
// Prints one JSON line: case name -> the text of the result (or "accepted" for the
// notification), or {"error": ...}.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const ROOT_URI = 'file:///interop/ts';

const [mode, ...rest] = process.argv.slice(2);
const transport =
    mode === 'http'
        ? new StreamableHTTPClientTransport(new URL(rest[0]))
        : new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: 'ignore' });

const client = new Client(
    { name: 'ts-sdk-peer', version: '1.0.0' },
    {
        capabilities: { elicitation: { form: {} }, sampling: {}, roots: {} },
        versionNegotiation: { mode: { pin: '2026-07-28' } }
    }
);

client.setRequestHandler('elicitation/create', async request => {
    const field = Object.keys(request.params.requestedSchema?.properties ?? {})[0] ?? 'value';
    return { action: 'accept', content: { [field]: field === 'confirm' ? true : `${field}-from-ts` } };
});
client.setRequestHandler('sampling/createMessage', async () => ({
    role: 'assistant',
    model: 'ts-model',
    content: { type: 'text', text: 'sampled-by-ts' }
}));
client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: ROOT_URI, name: 'interop' }] }));

function textOf(result) {
    if (result.messages) return result.messages.map(m => m.content.text ?? '').join(' ');
    if (result.contents) return result.contents.map(c => c.text ?? '').join(' ');
    return (result.content ?? []).map(b => b.text ?? '').join(' ');
}

const out = {};
try {
    await client.connect(transport);
    const cases = {
        tools: async () => (await client.listTools()).tools.map(tool => tool.name).sort(),
        echo: async () => textOf(await client.callTool({ name: 'echo', arguments: { text: 'hello' } })),
        confirm_delete: async () => textOf(await client.callTool({ name: 'confirm_delete', arguments: { path: 'a.txt' } })),
        gather: async () => textOf(await client.callTool({ name: 'gather', arguments: {} })),
        three_rounds: async () => textOf(await client.callTool({ name: 'three_rounds', arguments: {} })),
        briefing: async () => textOf(await client.getPrompt({ name: 'briefing', arguments: { topic: 'mrtr' } })),
        notes: async () => textOf(await client.readResource({ uri: 'notes://work' })),
        // A refused notification POST rejects this promise.
        notify: async () => {
            await client.notification({ method: 'notifications/interop', params: {} });
            return 'accepted';
        }
    };
    for (const [name, run] of Object.entries(cases)) {
        try {
            out[name] = await run();
        } catch (error) {
            out[name] = { error: `${error?.name}: ${error?.message}` };
        }
    }
} finally {
    await client.close();
}
console.log(JSON.stringify(out));
