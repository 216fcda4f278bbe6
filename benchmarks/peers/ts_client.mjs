// Benchmark peer: a client built on the official TypeScript SDK v2 (@modelcontextprotocol/client
// 2.4.0), pinned to 2026-07-28, its automatic input_required loop answering the elicitation
// (accept, confirm: true). It runs the command loop of loop.py (the "seq" op): one JSON
// command per line on stdin, one JSON answer per line on stdout, with per-call latencies,
// the wall time of the run and this process's CPU time over it.
//
//   node ts_client.mjs URL
import { createInterface } from 'node:readline';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const client = new Client(
    { name: 'mrtr-bench-ts', version: '1.0' },
    { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } }, inputRequired: { maxRounds: 16 } }
);
client.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { confirm: true } }));
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));

const answer = payload => process.stdout.write(JSON.stringify(payload) + '\n');

async function seq(command) {
    if (command.op !== 'seq') throw new Error(`unsupported op ${JSON.stringify(command.op)} for this client`);
    const call = { name: command.tool, arguments: command.arguments ?? {} };
    const lat = [];
    const cpu = process.cpuUsage();
    const start = process.hrtime.bigint();
    for (let i = 0; i < Number(command.n); i++) {
        const t0 = process.hrtime.bigint();
        const result = await client.callTool(call);
        if (result.isError) throw new Error(`tool ${call.name} failed: ${JSON.stringify(result)}`);
        lat.push(Number(process.hrtime.bigint() - t0));
    }
    const wall = Number(process.hrtime.bigint() - start);
    const used = process.cpuUsage(cpu);
    return { lat_ns: lat, wall_ns: wall, cpu_ns: (used.user + used.system) * 1000 };
}

for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const command = JSON.parse(line);
    if (command.op === 'quit') break;
    try {
        answer(await seq(command));
    } catch (error) {
        answer({ error: `${error?.name}: ${error?.message}` });
    }
}
await client.close();
process.exit(0);
