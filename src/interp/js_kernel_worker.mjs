// The JavaScript and TypeScript kernel's execution process, started by js_kernel.mjs (read its
// header first). Cells run in this process's main context (vm.Script.runInThisContext), so that
// their values, prototypes and modules are node's own: `[] instanceof Array` holds for arrays
// that node's modules return, and `require`, `process` and `import()` behave as in a script.
//
//   fd 0: /dev/null    fds 1, 2: the cells' output (pipes the launcher reads)
//   fd 3: the control channel with the launcher: execute requests in, messages out (JSON lines)
//
// Started as `node --expose-internals js_kernel_worker.mjs [--typescript]`: --expose-internals
// gives the acorn parser that node bundles for its own REPL, so the kernel needs no package of
// its own for JavaScript; TypeScript needs the `typescript` package (package.json here).
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import process from 'node:process'; // a binding of this module: a cell may assign the global
import util from 'node:util';
import vm from 'node:vm';

// require() from this file: node's internal acorn, and the typescript package next to it.
const requireHere = createRequire(import.meta.url);
const acorn = requireHere('internal/deps/acorn/acorn/dist/acorn');
const typescriptMode = process.argv.includes('--typescript');

// `require` as a script in the context's cwd has it (the main context has none of its own).
globalThis.require = createRequire(path.join(process.cwd(), '<cell>'));

// Captured now: a cell may replace or delete the globals, which breaks the cell, not the kernel.
const stringify = JSON.stringify;
const inspect = util.inspect;
const isPromise = util.types.isPromise;
const stdoutStream = process.stdout, stderrStream = process.stderr;
const writeStdout = stdoutStream.write, writeStderr = stderrStream.write;

// A cell that closes fd 1 or 2, or destroys the streams, must not crash the kernel through an
// unhandled stream 'error'.
stdoutStream.on('error', () => {});
stderrStream.on('error', () => {});

// --- the TypeScript transpiler, loaded once; its absence is reported per execution ---

let typescript = null, typescriptMissing = null;
if (typescriptMode) {
    try {
        typescript = requireHere('typescript');
    } catch (e) {
        typescriptMissing = 'the TypeScript transpiler is not installed (no package "typescript" ' +
            'under ' + new URL('node_modules/', import.meta.url).pathname + '; run `npm ci` in ' +
            'src/interp): ' + e.message.split('\n')[0];
    }
}

// Type annotations, interfaces and enums become JavaScript; import statements are kept as
// written (verbatimModuleSyntax), since an import unused in this cell may be used in the next.
function transpileTypescript(code) {
    if (!typescript) {
        const e = new Error(typescriptMissing);
        e.name = 'TypeScriptUnavailable';
        throw e;
    }
    const ts = typescript;
    const out = ts.transpileModule(code, {
        fileName: 'cell.ts',
        reportDiagnostics: true,
        compilerOptions: {
            target: ts.ScriptTarget.ESNext,
            module: ts.ModuleKind.ESNext,
            verbatimModuleSyntax: true,
            preserveConstEnums: true,
            sourceMap: false,
        },
    });
    const errors = (out.diagnostics || []).filter(d => d.category === ts.DiagnosticCategory.Error);
    if (errors.length) {
        const lines = errors.map(d => {
            const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
            if (!d.file || d.start === undefined)
                return { text, where: '' };
            const pos = d.file.getLineAndCharacterOfPosition(d.start);
            return { text, where: `cell.ts(${pos.line + 1},${pos.character + 1})` };
        });
        const e = new SyntaxError(lines[0].text);
        e.stack = lines.map((l, i) =>
            `${l.where ? l.where + ': ' : ''}error TS${errors[i].code}: ${l.text}`).join('\n');
        throw e;
    }
    return out.outputText;
}

// --- a cell's JavaScript, rewritten so that what it declares outlives it ---
//
// Top-level let, const and class become var: in a script, var names are properties of the
// global object, visible to every later cell and declarable again when a cell is run twice
// (a top-level let or const would stay visible too, but a second run would be a SyntaxError).
// A cell with top-level await or an import statement runs as an async function instead: its
// declarations are hoisted as vars in front of it and become assignments inside, its imports
// become `await import(...)`, and its last expression statement is returned as its value.
// Anything acorn cannot parse is left to V8, so that syntax errors carry V8's own messages.

const parseOptions = {
    ecmaVersion: 'latest',
    sourceType: 'script',
    allowAwaitOutsideFunction: true,
    allowImportExportEverywhere: true,
    allowHashBang: true,
};

const functionTypes = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

// Whether node (a statement or expression) awaits outside any function of its own.
function awaitsAtTopLevel(node) {
    if (!node || typeof node.type !== 'string' || functionTypes.has(node.type))
        return false;
    if (node.type === 'AwaitExpression' || (node.type === 'ForOfStatement' && node.await))
        return true;
    for (const key of Object.keys(node)) {
        const child = node[key];
        if (Array.isArray(child)) {
            if (child.some(awaitsAtTopLevel))
                return true;
        } else if (child && typeof child === 'object' && awaitsAtTopLevel(child)) {
            return true;
        }
    }
    return false;
}

// The names a binding pattern declares: `{a, b: [c, ...d], e = 1}` declares a, c, d, e.
function patternNames(pattern, names) {
    switch (pattern.type) {
    case 'Identifier': names.push(pattern.name); break;
    case 'ObjectPattern':
        for (const p of pattern.properties)
            patternNames(p.type === 'RestElement' ? p.argument : p.value, names);
        break;
    case 'ArrayPattern':
        for (const e of pattern.elements)
            if (e)
                patternNames(e, names);
        break;
    case 'RestElement': patternNames(pattern.argument, names); break;
    case 'AssignmentPattern': patternNames(pattern.left, names); break;
    }
    return names;
}

function importAsAssignment(stmt, src) {
    const attributes = (stmt.attributes || []).map(a =>
        `${stringify(a.key.type === 'Identifier' ? a.key.name : a.key.value)}: ${stringify(a.value.value)}`);
    const load = `await import(${stringify(stmt.source.value)}` +
        (attributes.length ? `, { with: { ${attributes.join(', ')} } })` : ')');
    const namespace = stmt.specifiers.find(s => s.type === 'ImportNamespaceSpecifier');
    const others = stmt.specifiers.filter(s => s.type !== 'ImportNamespaceSpecifier');
    if (!stmt.specifiers.length)
        return `${load};`;
    const parts = [];
    if (namespace)
        parts.push(`${namespace.local.name} = ${load};`);
    if (others.length) {
        const fields = others.map(s => {
            if (s.type === 'ImportDefaultSpecifier')
                return `default: ${s.local.name}`;
            const name = s.imported.type === 'Identifier' ? s.imported.name : stringify(s.imported.value);
            return `${name}: ${s.local.name}`;
        });
        parts.push(`({ ${fields.join(', ')} } = ${namespace ? namespace.local.name : load});`);
    }
    return parts.join(' ');
}

function rewriteCell(code) {
    let program;
    try {
        program = acorn.parse(code, parseOptions);
    } catch {
        return { code, isAsync: false };
    }
    const body = program.body;
    const isAsync = body.some(s => s.type === 'ImportDeclaration' || awaitsAtTopLevel(s));
    const edits = []; // [start, end, replacement], in source order, never overlapping
    const hoisted = [];
    const functionNames = [];
    const text = node => code.slice(node.start, node.end);

    for (let stmt of body) {
        if (stmt.type === 'ExportNamedDeclaration' || stmt.type === 'ExportDefaultDeclaration') {
            // A cell is no module: `export const x` is `const x`; `export {}` (which the
            // TypeScript transpiler adds to keep a file a module) is nothing.
            const inner = stmt.declaration;
            if (!inner) {
                edits.push([stmt.start, stmt.end, '']);
                continue;
            }
            edits.push([stmt.start, inner.start, '']);
            if (!inner.type.endsWith('Declaration') || !inner.id)
                continue; // export default <expression>: left as an expression statement
            stmt = inner;
        }
        if (stmt.type === 'ImportDeclaration') {
            for (const s of stmt.specifiers)
                hoisted.push(s.local.name);
            edits.push([stmt.start, stmt.end, importAsAssignment(stmt, code)]);
        } else if (stmt.type === 'VariableDeclaration') {
            if (!isAsync) {
                if (stmt.kind !== 'var')
                    edits.push([stmt.start, stmt.start + stmt.kind.length, 'var']);
                continue;
            }
            const assignments = [];
            for (const d of stmt.declarations) {
                patternNames(d.id, hoisted);
                if (d.init || stmt.kind !== 'var')
                    assignments.push(`(${text(d.id)} = ${d.init ? text(d.init) : 'undefined'});`);
            }
            edits.push([stmt.start, stmt.end, assignments.join(' ')]);
        } else if (stmt.type === 'ClassDeclaration') {
            if (isAsync) {
                hoisted.push(stmt.id.name);
                edits.push([stmt.start, stmt.start, `${stmt.id.name} = `]);
            } else {
                edits.push([stmt.start, stmt.start, `var ${stmt.id.name} = `]);
            }
            edits.push([stmt.end, stmt.end, ';']);
        } else if (stmt.type === 'FunctionDeclaration' && isAsync) {
            hoisted.push(stmt.id.name);
            functionNames.push(stmt.id.name);
        }
    }
    const last = body[body.length - 1];
    if (isAsync && last && last.type === 'ExpressionStatement')
        edits.push([last.start, last.end, `return (${text(last.expression)});`]);

    edits.sort((a, b) => a[0] - b[0]);
    let out = '', at = 0;
    for (const [start, end, replacement] of edits) {
        out += code.slice(at, start) + replacement;
        at = end;
    }
    out += code.slice(at);
    if (!isAsync)
        return { code: out, isAsync };
    // All on the first line, so that line numbers in stack traces are the cell's own. A
    // function declared in the cell is hoisted inside the async function, and published
    // under its name at its start, as a script would have.
    const declare = hoisted.length ? `var ${[...new Set(hoisted)].join(', ')}; ` : '';
    const publish = functionNames.map(n => `globalThis[${stringify(n)}] = ${n}; `).join('');
    return { code: `${declare}(async () => { ${publish}${out}\n})()`, isAsync };
}

// --- results and errors, as E2B's server sends them ---

// MIME types as E2B's Result names them; any other goes to `extra`.
const formatOfMime = {
    'text/plain': 'text', 'text/html': 'html', 'text/markdown': 'markdown',
    'image/svg+xml': 'svg', 'image/png': 'png', 'image/jpeg': 'jpeg', 'application/pdf': 'pdf',
    'text/latex': 'latex', 'application/json': 'json', 'application/javascript': 'javascript',
    'e2b/data': 'data', 'e2b/chart': 'chart',
};

// A value's MIME bundle the way IJavascript (E2B's JavaScript kernel) builds it: util.inspect
// for text/plain, and the optional _toMime/_toHtml/_toSvg/_toPng/_toJpeg methods of the value.
function mimeBundle(value) {
    let mime = {};
    const call = (name) => {
        try {
            return value !== null && typeof value[name] === 'function' ? value[name]() : undefined;
        } catch {
            return undefined;
        }
    };
    const custom = call('_toMime');
    if (custom && typeof custom === 'object')
        mime = { ...custom };
    if (!('text/plain' in mime))
        mime['text/plain'] = inspect(value);
    for (const [method, type] of [['_toHtml', 'text/html'], ['_toSvg', 'image/svg+xml'],
                                  ['_toPng', 'image/png'], ['_toJpeg', 'image/jpeg']]) {
        if (!(type in mime)) {
            const v = call(method);
            if (v !== undefined)
                mime[type] = v;
        }
    }
    return mime;
}

function resultMessage(mime, isMain) {
    const msg = { type: 'result' };
    const extra = {};
    for (const [type, data] of Object.entries(mime)) {
        const format = formatOfMime[type];
        if (!format) {
            extra[type] = data;
        } else if (format === 'json' || format === 'data' || format === 'chart') {
            if (data && typeof data === 'object')
                msg[format] = data;
        } else if (typeof data === 'string') {
            msg[format] = data;
        }
    }
    // E2B's server strips one pair of quotes around text/plain ('abc' -> abc); the daemon
    // forwards text as it is, so the kernel does it.
    const t = msg.text;
    if (t && t.length >= 2 && (t[0] === "'" || t[0] === '"') && t[t.length - 1] === t[0])
        msg.text = t.slice(1, -1);
    msg.extra = extra;
    msg.is_main_result = isMain;
    return msg;
}

// IJavascript's `$$`, a cell's handle on its own execution: $$.html(s), .svg, .png and .jpeg
// (base64), .json, .text and .mime({type: data}) send the cell's result in that form (its value
// is then not sent); $$.display() has the same methods for displays (is_main_result false, any
// number); $$.async() makes the execution wait for $$.done([value]), $$.sendResult(value) or
// $$.sendError(error). A handle kept past its execution's end sends nothing.
function cellHandle(execution) {
    const result = (mime) => {
        if (!execution.open || execution.resultSent)
            return;
        execution.resultSent = true;
        send(resultMessage(mime, true));
        execution.release();
    };
    const display = (mime) => {
        if (execution.open)
            send(resultMessage(mime, false));
    };
    const senders = (out) => ({
        mime: bundle => out({ ...bundle }),
        text: t => out({ 'text/plain': String(t) }),
        html: h => out({ 'text/html': String(h) }),
        svg: v => out({ 'image/svg+xml': String(v) }),
        png: b => out({ 'image/png': String(b) }),
        jpeg: b => out({ 'image/jpeg': String(b) }),
        json: j => out({ 'application/json': j }),
    });
    return {
        ...senders(result),
        sendResult: value => result(mimeBundle(value)),
        sendError: e => {
            if (!execution.open || execution.errorSent)
                return;
            execution.errorSent = true;
            send(errorMessage(e));
            execution.release();
        },
        async: (on = true) => (execution.waiting = !!on),
        done: function (value) {
            if (arguments.length)
                result(mimeBundle(value));
            execution.release();
        },
        display: () => senders(display),
    };
}

// The stack from the cell's own frames down to the first of the kernel's (this file, node:vm,
// and the event loop under them), which say nothing about the cell.
function cellStack(stack) {
    const lines = String(stack).split('\n');
    const kernelFrame = lines.findIndex(line => /^\s+at /.test(line) &&
        (line.includes(import.meta.url) || line.includes('node:vm:') || line.includes('node:internal/') ||
         line.includes('node:events:')));
    return (kernelFrame < 0 ? lines : lines.slice(0, kernelFrame)).join('\n');
}

// As IJavascript reports a thrown value: its name (or its type), its message (or its
// inspection), its stack.
function errorMessage(e) {
    const isObject = e !== null && (typeof e === 'object' || typeof e === 'function');
    let name = typeof e, value, traceback = '';
    try {
        if (isObject && e.name)
            name = String(e.name);
        value = isObject && e.message ? String(e.message) : inspect(e);
        if (isObject && e.stack)
            traceback = cellStack(e.stack);
    } catch {
        value = value ?? 'a thrown value that cannot be inspected';
    }
    return { type: 'error', name, value, traceback };
}

// --- the control channel, and the barriers that keep output and messages in order ---
//
// A message is sent after a barrier mark on fd 1 and fd 2; the launcher holds the message until
// it has read both marks, so all output written before it (by the cell, or by a child process
// on the same pipes) reaches the daemon before the message does.

const control = new net.Socket({ fd: 3, readable: true, writable: true });
let barrierToken = null, barrierSeq = 0;

function send(msg) {
    if (barrierToken !== null) {
        const mark = `\u0000hutch-barrier:${barrierToken}:${++barrierSeq}\u0000`;
        try {
            writeStdout.call(stdoutStream, mark);
        } catch { /* fd 1 closed by the cell: the launcher does not wait for it */ }
        try {
            writeStderr.call(stderrStream, mark);
        } catch { /* likewise */ }
        msg = { ...msg, barrier: barrierSeq };
    }
    control.write(stringify(msg) + '\n');
}

// --- executions ---

let cellNumber = 0;
let running = false;
let interruptPending = null; // rejects the execution's pending await on SIGINT

function interruptError() {
    const e = new Error('Script execution was interrupted by `SIGINT`');
    e.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED'; // as breakOnSigint's own
    return e;
}

// A SIGINT during synchronous code is handled by breakOnSigint (these listeners are off then);
// one while the cell awaits abandons the await; one while idle is ignored.
process.on('SIGINT', () => {
    if (interruptPending)
        interruptPending(interruptError());
});

// What a cell leaves behind (a rejected promise nobody awaited, a throw in a timer) is
// reported on stderr, as node's REPL does, and does not end the kernel.
function reportStray(what, e) {
    let text;
    try {
        text = `${what}: ${e && e.stack ? cellStack(e.stack) : inspect(e)}\n`;
    } catch {
        text = `${what}\n`;
    }
    try {
        writeStderr.call(stderrStream, text);
    } catch { /* stderr closed by a cell */ }
}
process.on('uncaughtException', e => reportStray('Uncaught', e));
process.on('unhandledRejection', e => reportStray('Unhandled promise rejection', e));

function setEnv(envVars) {
    const saved = [];
    if (!envVars || typeof envVars !== 'object')
        return saved;
    for (const [k, v] of Object.entries(envVars)) {
        saved.push([k, Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined]);
        process.env[k] = String(v);
    }
    return saved;
}

function restoreEnv(saved) {
    for (const [k, v] of saved.reverse()) {
        if (v === undefined)
            delete process.env[k];
        else
            process.env[k] = v;
    }
}

async function execute(request) {
    running = true;
    barrierToken = typeof request.barrier === 'string' ? request.barrier : null;
    barrierSeq = 0;
    const saved = setEnv(request.env_vars);
    const execution = { open: true, resultSent: false, errorSent: false, waiting: false,
                        released: false, release: () => { execution.released = true; } };
    globalThis.$$ = cellHandle(execution);
    try {
        const source = typescriptMode ? transpileTypescript(String(request.code)) : String(request.code);
        const cell = rewriteCell(source);
        const script = new vm.Script(cell.code, {
            filename: `cell-${++cellNumber}`,
            importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
        });
        let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
        // As in IJavascript, a cell whose value is a promise has the value it resolves to.
        if (cell.isAsync || isPromise(value)) {
            value = await new Promise((resolve, reject) => {
                interruptPending = reject;
                Promise.resolve(value).then(resolve, reject);
            });
        }
        if (execution.waiting && !execution.released) {
            await new Promise((resolve, reject) => {
                execution.release = resolve;
                interruptPending = reject;
            });
        }
        if (value !== undefined && !execution.resultSent && !execution.waiting)
            send(resultMessage(mimeBundle(value), true));
    } catch (e) {
        if (!execution.errorSent)
            send(errorMessage(e));
    } finally {
        execution.open = false;
        interruptPending = null;
        restoreEnv(saved);
    }
    send({ type: 'end_of_execution', id: request.id });
    barrierToken = null;
    running = false;
}

// Requests come one at a time (the daemon waits for an execution's end before the next); a
// line that is not an execute or environment request is ignored.
let pending = '';
const queue = [];
control.setEncoding('utf8');
control.on('data', chunk => {
    pending += chunk;
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        try {
            const request = JSON.parse(line);
            if (request && (request.type === 'execute' || request.type === 'environment'))
                queue.push(request);
        } catch { /* not JSON: ignored */ }
    }
    drain();
});
// The launcher is gone: so is this process, whatever the cells left running.
control.on('end', () => process.exit(0));
control.on('error', () => process.exit(0));

async function drain() {
    while (!running && queue.length) {
        const request = queue.shift();
        if (request.type === 'environment')
            setEnv(request.env_vars); // for good: the sandbox's own (a warm pool's kernel)
        else
            await execute(request);
    }
}

send({ type: 'ready' });
