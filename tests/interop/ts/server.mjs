// A server written with the official TypeScript SDK v2 (@modelcontextprotocol/server): the
// peer mrtr's clients are tested against. The same cases as ../peers/sdk_server.py:
//
//   tool echo(text)             no input
//   tool confirm_delete(path)   one elicitation (key "confirm")
//   tool gather()               an elicitation, a sampling and a roots request in ONE round
//   tool three_rounds()         elicitation, then sampling, then roots; what earlier rounds
//                               answered travels in requestState (the SDK's HMAC codec)
//   prompt briefing(topic)      one elicitation (key "audience")
//   resource notes://{folder}   one roots request (key "roots")
//
//   node server.mjs http     serves Streamable HTTP on a free port of 127.0.0.1 and prints
//                            "READY <url>"
//   node server.mjs stdio    serves stdio
import { createServer } from 'node:http';

import { toNodeHandler } from '@modelcontextprotocol/node';
import {
    createMcpHandler,
    createRequestStateCodec,
    inputRequired,
    inputResponse,
    McpServer,
    ResourceTemplate
} from '@modelcontextprotocol/server';
import * as z from 'zod';

// A fixed key for this test peer only.
const codec = createRequestStateCodec({ key: 'interop-ts-peer-key-for-tests-only-0123456789' });

const text = value => ({ content: [{ type: 'text', text: value }] });

function form(message, field, type) {
    return inputRequired.elicit({
        message,
        requestedSchema: { type: 'object', properties: { [field]: { type } }, required: [field] }
    });
}

const sample = prompt =>
    inputRequired.createMessage({
        messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
        maxTokens: 50
    });

// The field of an accepted form answer, or undefined.
function field(responses, key, name) {
    const view = inputResponse(responses, key);
    return view.kind === 'elicit' && view.action === 'accept' ? view.content?.[name] : undefined;
}

function sampled(responses, key) {
    const view = inputResponse(responses, key);
    return view.kind === 'sampling' && view.result.content.type === 'text' ? view.result.content.text : undefined;
}

function rootUris(responses, key) {
    const view = inputResponse(responses, key);
    return view.kind === 'roots' ? view.roots.map(root => root.uri).join(',') : undefined;
}

function build() {
    const server = new McpServer(
        { name: 'ts-sdk-peer', version: '1.0.0' },
        { requestState: { verify: codec.verify } }
    );

    server.registerTool('echo', { description: 'Echoes its text', inputSchema: z.object({ text: z.string() }) }, async ({ text: value }) =>
        text(value)
    );

    server.registerTool(
        'confirm_delete',
        { description: 'Deletes a file after the user confirms', inputSchema: z.object({ path: z.string() }) },
        async ({ path }, ctx) => {
            const responses = ctx.mcpReq.inputResponses;
            if (inputResponse(responses, 'confirm').kind !== 'elicit') {
                return inputRequired({ inputRequests: { confirm: form(`Delete ${path}?`, 'confirm', 'boolean') } });
            }
            return text(field(responses, 'confirm', 'confirm') === true ? `deleted ${path}` : `kept ${path}`);
        }
    );

    server.registerTool('gather', { description: 'Asks three things in one round', inputSchema: z.object({}) }, async (_args, ctx) => {
        const responses = ctx.mcpReq.inputResponses;
        const name = field(responses, 'name', 'name');
        const haiku = sampled(responses, 'haiku');
        const roots = rootUris(responses, 'roots');
        if (name === undefined || haiku === undefined || roots === undefined) {
            return inputRequired({
                inputRequests: {
                    name: form('Your name?', 'name', 'string'),
                    haiku: sample('Write a haiku'),
                    roots: inputRequired.listRoots()
                }
            });
        }
        return text(`name=${name}; haiku=${haiku}; roots=${roots}`);
    });

    server.registerTool('three_rounds', { description: 'Asks three things in three rounds', inputSchema: z.object({}) }, async (_args, ctx) => {
        const responses = ctx.mcpReq.inputResponses;
        const state = ctx.mcpReq.requestState() ?? {};
        const name = state.name ?? field(responses, 'step1', 'name');
        if (name === undefined) {
            return inputRequired({ inputRequests: { step1: form('Step 1: your name?', 'name', 'string') } });
        }
        const poem = state.poem ?? sampled(responses, 'step2');
        if (poem === undefined) {
            return inputRequired({ inputRequests: { step2: sample(`A poem for ${name}`) }, requestState: await codec.mint({ name }) });
        }
        const roots = rootUris(responses, 'step3');
        if (roots === undefined) {
            return inputRequired({ inputRequests: { step3: inputRequired.listRoots() }, requestState: await codec.mint({ name, poem }) });
        }
        return text(`name=${name}; poem=${poem}; roots=${roots}`);
    });

    server.registerPrompt(
        'briefing',
        { description: 'A briefing on a topic', argsSchema: z.object({ topic: z.string() }) },
        async ({ topic }, ctx) => {
            const audience = field(ctx.mcpReq.inputResponses, 'audience', 'audience');
            if (audience === undefined) {
                return inputRequired({ inputRequests: { audience: form('Who is the audience?', 'audience', 'string') } });
            }
            return { messages: [{ role: 'user', content: { type: 'text', text: `Brief ${audience} about ${topic}` } }] };
        }
    );

    server.registerResource(
        'notes',
        new ResourceTemplate('notes://{folder}', { list: undefined }),
        { mimeType: 'text/plain', description: 'Notes of a folder' },
        async (uri, variables, ctx) => {
            const roots = rootUris(ctx.mcpReq.inputResponses, 'roots');
            if (roots === undefined) {
                return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
            }
            return { contents: [{ uri: uri.href, mimeType: 'text/plain', text: `notes of ${variables.folder} under ${roots}` }] };
        }
    );
    return server;
}

const mode = process.argv[2] ?? 'http';
if (mode === 'http') {
    const handler = toNodeHandler(createMcpHandler(build));
    const http = createServer((req, res) => handler(req, res));
    http.listen(0, '127.0.0.1', () => {
        const { port } = http.address();
        console.log(`READY http://127.0.0.1:${port}/mcp`);
    });
    process.on('SIGTERM', () => http.close(() => process.exit(0)));
} else if (mode === 'stdio') {
    const { serveStdio } = await import('@modelcontextprotocol/server/stdio');
    await serveStdio(build);
} else {
    console.error(`unknown mode ${mode}: http or stdio`);
    process.exit(2);
}
