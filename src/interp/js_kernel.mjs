// The JavaScript and TypeScript kernel: `node js_kernel.mjs [--typescript]`, speaking
// PROTOCOL.md on fds 0 and 1.
//
// Node cannot move its own fds (it has no dup2), and a cell's output must be read from fds 1
// and 2 of the process that runs it, so that console.log, process.stdout.write and a child
// process writing to the inherited fds all arrive the same way. So the kernel is two processes:
// this launcher, which runs no user code, and js_kernel_worker.mjs, which runs the cells with
// stdin /dev/null, fds 1 and 2 pipes that the launcher reads, and fd 3 a control channel
// (execute requests in; ready, result, error, end_of_execution out).
//
// Output and messages travel on different pipes, so the worker puts a barrier mark (a random
// per-execution token and a sequence number) on fds 1 and 2 before each message; the launcher
// holds a message until it has read that mark on both, which puts every byte written before
// the message in front of it. User code can fake no mark without the token; a cell that closes
// fd 1 or 2 only costs its messages a short wait (BARRIER_WAIT_MS).
//
// The worker is its own process group. A SIGINT to the launcher while a cell runs is sent to
// that group (the cell's child processes are interrupted too, as by Ctrl-C in a terminal);
// while idle it is ignored. A worker that does not end the cell within INTERRUPT_GRACE_MS (a
// busy loop after an await, which no SIGINT handler can reach) is killed and replaced, as is one
// that exits (process.exit in a cell): the execution gets an error, the context keeps working
// with its state cleared.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import { fileURLToPath } from 'node:url';

const typescriptMode = process.argv.includes('--typescript');
const language = typescriptMode ? 'typescript' : 'javascript';
const workerFile = fileURLToPath(new URL('js_kernel_worker.mjs', import.meta.url));

const CHUNK_BYTES = 65536 - 4;      // output bytes per message: at most 64 KiB with a split character
const IDLE_OUTPUT_MAX = 1 << 20;    // output kept while idle, for the next execution
const BARRIER_WAIT_MS = 1000;       // a mark that does not come (fd 1 or 2 closed by a cell)
const INTERRUPT_GRACE_MS = 2000;    // under the daemon's 3 s, so the kernel restarts its own worker
const EXIT_DRAIN_MS = 300;          // a dead worker's output still in the pipes

function diagnostic(text) {
    process.stderr.write(`js_kernel: ${text}\n`);
}

function emit(msg) {
    process.stdout.write(JSON.stringify(msg) + '\n');
}

// --- state ---

let worker = null;         // { child, control, streams, pendingMessages, ready, exited, barrierTimer }
let everReady = false;
const requests = [];       // execute requests waiting for the worker
let current = null;        // { id, token, interrupted, errorSent, graceTimer }
let idleOutput = [];       // [type, text] written while no execution ran
let idleOutputSize = 0;

// --- output ---

function deliverOutput(type, text) {
    if (!text)
        return;
    if (current) {
        emit({ type, text });
    } else if (idleOutputSize + text.length <= IDLE_OUTPUT_MAX) {
        idleOutput.push([type, text]);
        idleOutputSize += text.length;
    }
}

function barrierPrefix() {
    return current ? `\u0000hutch-barrier:${current.token}:` : null;
}

// Passes a stream's text on, taking out the current execution's barrier marks. A tail that may
// be the start of a mark waits for the next read; any other text goes at once.
function scanOutput(stream) {
    const prefix = barrierPrefix();
    while (prefix) {
        const at = stream.text.indexOf(prefix);
        if (at < 0)
            break;
        deliverOutput(stream.type, stream.text.slice(0, at));
        const close = stream.text.indexOf('\u0000', at + prefix.length);
        if (close < 0) { // the rest of the mark is in the next read
            stream.text = stream.text.slice(at);
            return;
        }
        const seq = Number(stream.text.slice(at + prefix.length, close));
        if (Number.isInteger(seq) && seq > stream.passed)
            stream.passed = seq;
        stream.text = stream.text.slice(close + 1);
    }
    const nul = prefix ? stream.text.lastIndexOf('\u0000') : -1;
    const keep = nul >= 0 && prefix.startsWith(stream.text.slice(nul)) ? nul : stream.text.length;
    deliverOutput(stream.type, stream.text.slice(0, keep));
    stream.text = stream.text.slice(keep);
}

function makeStream(type, readable) {
    const stream = { type, decoder: new StringDecoder('utf8'), text: '', passed: 0, ended: false };
    readable.on('data', chunk => {
        for (let i = 0; i < chunk.length; i += CHUNK_BYTES) {
            stream.text += stream.decoder.write(chunk.subarray(i, i + CHUNK_BYTES));
            scanOutput(stream);
        }
        releaseMessages(false);
    });
    readable.on('end', () => {
        stream.text += stream.decoder.end();
        stream.ended = true;
        scanOutput(stream);
        releaseMessages(false);
    });
    readable.on('error', () => {});
    return stream;
}

// --- the worker's messages ---

function messageFromWorker(line) {
    let msg;
    try {
        msg = JSON.parse(line);
    } catch {
        diagnostic('the worker sent a line that is not JSON; dropped');
        return;
    }
    if (!msg || typeof msg !== 'object' || typeof msg.type !== 'string')
        return;
    worker.pendingMessages.push(msg);
    releaseMessages(false);
}

// Messages whose barrier marks have been read on both streams, in order. `force` releases them
// all (the marks will not come).
function releaseMessages(force) {
    const w = worker;
    if (!w)
        return;
    while (w.pendingMessages.length) {
        const msg = w.pendingMessages[0];
        const seq = msg.barrier;
        const passed = s => s.ended || s.passed >= seq;
        if (!force && typeof seq === 'number' && !(w.streams.every(passed))) {
            if (!w.barrierTimer)
                w.barrierTimer = setTimeout(() => {
                    w.barrierTimer = null;
                    diagnostic('a barrier mark did not come; the messages go without it');
                    flushHeldOutput(w);
                    releaseMessages(true);
                }, BARRIER_WAIT_MS);
            return;
        }
        w.pendingMessages.shift();
        handleMessage(msg);
    }
    if (w.barrierTimer) {
        clearTimeout(w.barrierTimer);
        w.barrierTimer = null;
    }
}

function flushHeldOutput(w) {
    for (const s of w.streams) {
        deliverOutput(s.type, s.text);
        s.text = '';
    }
}

function handleMessage(msg) {
    switch (msg.type) {
    case 'ready':
        worker.ready = true;
        if (!everReady) {
            everReady = true;
            emit({ type: 'ready', language });
        }
        startNext();
        break;
    case 'result':
        if (current) {
            const { barrier, ...result } = msg;
            emit(result);
        }
        break;
    case 'error':
        if (current && !current.errorSent) {
            current.errorSent = true;
            emit({
                type: 'error',
                name: String(msg.name ?? ''),
                value: String(msg.value ?? ''),
                traceback: String(msg.traceback ?? ''),
            });
        }
        break;
    case 'end_of_execution':
        if (current && msg.id === current.id)
            finishExecution();
        break;
    }
}

// --- executions ---

function startNext() {
    if (current || !worker || !worker.ready || worker.exited || !requests.length)
        return;
    const request = requests.shift();
    current = { id: request.id, token: randomBytes(16).toString('hex'), interrupted: false,
                errorSent: false, graceTimer: null };
    for (const s of worker.streams)
        s.passed = 0; // sequence numbers start again with each execution's token
    const held = idleOutput;
    idleOutput = [];
    idleOutputSize = 0;
    for (const [type, text] of held)
        emit({ type, text });
    worker.control.write(JSON.stringify({
        type: 'execute', id: request.id, code: request.code,
        env_vars: request.env_vars, barrier: current.token,
    }) + '\n');
}

function finishExecution() {
    if (current.graceTimer)
        clearTimeout(current.graceTimer);
    if (worker)
        flushHeldOutput(worker); // a tail held as a possible mark: none can follow the end
    emit({ type: 'end_of_execution', id: current.id });
    current = null;
    startNext();
}

function failExecution(name, value) {
    if (!current.errorSent) {
        current.errorSent = true;
        emit({ type: 'error', name, value, traceback: '' });
    } else {
        emit({ type: 'stderr', text: `${name}: ${value}\n` });
    }
    finishExecution();
}

// --- the worker's life ---

function startWorker() {
    const args = ['--expose-internals', '--disable-warning=ExperimentalWarning', workerFile];
    if (typescriptMode)
        args.push('--typescript');
    const child = spawn(process.execPath, args, {
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
        detached: true, // its own process group, for SIGINT and for SIGKILL of its children
    });
    const w = { child, control: child.stdio[3], pendingMessages: [], ready: false,
                exited: false, barrierTimer: null };
    w.streams = [makeStream('stdout', child.stdout), makeStream('stderr', child.stderr)];
    let pending = '';
    w.control.setEncoding('utf8');
    w.control.on('data', chunk => {
        if (worker !== w)
            return;
        pending += chunk;
        let nl;
        while ((nl = pending.indexOf('\n')) >= 0) {
            const line = pending.slice(0, nl);
            pending = pending.slice(nl + 1);
            messageFromWorker(line);
        }
    });
    w.control.on('error', () => {});
    child.on('error', e => {
        diagnostic(`cannot start the worker: ${e.message}`);
        process.exit(1);
    });
    child.on('exit', (code, signal) => onWorkerExit(w, code, signal));
    worker = w;
}

function killWorkerGroup(w) {
    try {
        process.kill(-w.child.pid, 'SIGKILL');
    } catch { /* already gone */ }
}

function onWorkerExit(w, code, signal) {
    w.exited = true;
    const how = signal ? `signal ${signal}` : `exit code ${code}`;
    // What it wrote last may still be in the pipes; a child of its that holds them open is
    // not waited for.
    const drained = new Promise(resolve => {
        const deadline = Date.now() + EXIT_DRAIN_MS;
        const poll = setInterval(() => {
            if (w.streams.every(s => s.ended) || Date.now() >= deadline) {
                clearInterval(poll);
                resolve();
            }
        }, 10);
    });
    drained.then(() => {
        flushHeldOutput(w);
        releaseMessages(true);
        if (w.barrierTimer)
            clearTimeout(w.barrierTimer);
        killWorkerGroup(w); // what the cells left running goes with it
        if (!w.ready) {
            diagnostic(`the worker ended before it was ready (${how})`);
            process.exit(1);
        }
        worker = null;
        if (current) {
            if (current.interrupted)
                failExecution('Error', 'Script execution was interrupted by `SIGINT`, and did not ' +
                    'stop: the JavaScript process was killed, and the context restarted with its ' +
                    'state cleared');
            else
                failExecution('ContextRestarting', `the JavaScript process ended (${how}) while ` +
                    'running the cell: the context restarted with its state cleared');
        } else {
            diagnostic(`the worker ended while idle (${how}); starting a new one`);
        }
        startWorker();
    });
}

// --- the daemon's side ---

process.on('SIGINT', () => {
    if (!current || !worker || worker.exited)
        return;
    current.interrupted = true;
    try {
        process.kill(-worker.child.pid, 'SIGINT');
    } catch { /* exiting already */ }
    if (!current.graceTimer) {
        const w = worker;
        current.graceTimer = setTimeout(() => killWorkerGroup(w), INTERRUPT_GRACE_MS);
    }
});

function isStringMap(o) {
    return o !== null && typeof o === 'object' && !Array.isArray(o) &&
        Object.values(o).every(v => typeof v === 'string');
}

// The sandbox's env vars, for a kernel started before its sandbox was claimed (a warm pool's):
// ours, for a worker started later, and the running worker's (its control channel keeps them in
// order with the executes).
function takeEnvironment(envVars) {
    for (const [k, v] of Object.entries(envVars)) {
        try {
            process.env[k] = v;
        } catch (e) {
            diagnostic(`env var ${JSON.stringify(k)} not set: ${e}`);
        }
    }
    if (worker && !worker.exited)
        worker.control.write(JSON.stringify({ type: 'environment', env_vars: envVars }) + '\n');
}

let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', chunk => {
    input += chunk;
    let nl;
    while ((nl = input.indexOf('\n')) >= 0) {
        const line = input.slice(0, nl);
        input = input.slice(nl + 1);
        let request;
        try {
            request = JSON.parse(line);
        } catch {
            diagnostic('a request that is not JSON; ignored');
            continue;
        }
        if (request && request.type === 'execute' && typeof request.id === 'string' &&
            typeof request.code === 'string')
            requests.push(request);
        else if (request && request.type === 'environment' && isStringMap(request.env_vars))
            takeEnvironment(request.env_vars);
        else
            diagnostic('a request that is not an execute or environment request; ignored');
    }
    startNext();
});
// End of fd 0: the kernel exits, and its worker with everything the cells started.
process.stdin.on('end', () => {
    if (worker)
        killWorkerGroup(worker);
    process.exit(0);
});
process.stdout.on('error', () => {
    if (worker)
        killWorkerGroup(worker);
    process.exit(1);
});

startWorker();
