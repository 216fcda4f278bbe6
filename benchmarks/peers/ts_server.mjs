// Benchmark peer: an MCP 2026-07-28 server built on the official TypeScript SDK v2
// (@modelcontextprotocol/server 2.4.0, served by @modelcontextprotocol/node on node:http).
//
// Tools (the same names and wire shapes as our_server.py and sdk_server.py):
// - echo(text): one plain round;
// - delete_file(path): two rounds; round 1 asks for the elicitation form {"confirm": boolean}
//   and carries requestState (the SDK's HMAC codec); round 2 completes.
//
//   node ts_server.mjs --port 8765      (listens on 127.0.0.1 only; stop it with SIGTERM)
//
// It runs from a folder whose node_modules holds the SDK (see harness.ts_peers()).
import { createServer } from 'node:http';

import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler, createRequestStateCodec, inputRequired, inputResponse, McpServer } from '@modelcontextprotocol/server';
import * as z from 'zod';

const codec = createRequestStateCodec({ key: 'mrtr-benchmark-key-for-this-peer-only-0123' });
const confirmSchema = {
    type: 'object',
    properties: { confirm: { type: 'boolean', description: 'Really do it?' } },
    required: ['confirm']
};

function build() {
    const server = new McpServer({ name: 'mrtr-bench', version: '1.0' }, { requestState: { verify: codec.verify } });
    server.registerTool('echo', { description: 'Return the text unchanged', inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
        content: [{ type: 'text', text }]
    }));
    server.registerTool(
        'delete_file',
        { description: 'Ask for confirmation, then report the deletion', inputSchema: z.object({ path: z.string() }) },
        async ({ path }, ctx) => {
            const state = ctx.mcpReq.requestState();
            const answer = inputResponse(ctx.mcpReq.inputResponses, 'confirm');
            if (state?.pending !== path || answer.kind !== 'elicit' || answer.action !== 'accept' || answer.content?.confirm !== true) {
                return inputRequired({
                    inputRequests: { confirm: inputRequired.elicit({ message: `Delete ${path}?`, requestedSchema: confirmSchema }) },
                    requestState: await codec.mint({ pending: path })
                });
            }
            return { content: [{ type: 'text', text: `deleted ${path}` }] };
        }
    );
    return server;
}

const at = process.argv.indexOf('--port');
const port = at > 0 ? Number(process.argv[at + 1]) : 8765;
const handler = toNodeHandler(createMcpHandler(build));
const http = createServer((req, res) => handler(req, res));
http.keepAliveTimeout = 60_000;
http.listen(port, '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
