// The e2e suite's harness: a private hutch daemon for one test file, the E2B SDK pointed at it,
// and TAP output. Each test file imports it, calls `await start(...)`, runs its checks with
// `test(name, fn)` and ends with `await done()`.
//
// start(): picks a free loopback port, starts `build/hutch-san serve` (HUTCH_E2E_BIN overrides)
// with a private HUTCH_STATE_DIR and HUTCH_RUN_DIR (mktemp, mode 0755: the sandboxes' uids must
// reach the template layer) and its own HUTCH_API_KEY, waits for /health, and sets what the SDK
// reads: E2B_API_KEY, E2B_API_URL (the control plane) and E2B_SANDBOX_URL (envd: the SDK then sends
// every sandbox's traffic to that one URL with E2b-Sandbox-Id and E2b-Sandbox-Port headers, which
// is how the daemon routes it). E2B_DOMAIN is set to a name that is not one of E2B's own, so that
// nothing the SDK builds from it can reach E2B; E2B_DEBUG is cleared: debug mode is not what makes
// this work (it would fake create and allow one sandbox only).
//
// done(): kills every sandbox the daemon holds through the API (so the test leaves none behind,
// whatever it did), checks that none is left and that the daemon holds no more fds than at its
// start, stops the daemon by its pid (SIGTERM, then SIGKILL),
// checks that it exited cleanly (no sanitizer report), removes the directories and prints the plan.
// An uncaught error or unhandled rejection is a `not ok`, and the same cleanup runs.
//
// PENDING: a check whose feature is not built yet is named in the test file's PENDING map
// (name -> the feature); it prints `ok N - name # SKIP pending: feature` without running.
// HUTCH_E2E_RUN_PENDING=1 runs them anyway and reports them as `# TODO` (ok or not ok), so the
// lead can see which have landed.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, chmodSync, rmSync, openSync, closeSync, readFileSync, readdirSync, readlinkSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join, dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { randomBytes } from 'node:crypto'
import { inspect, isDeepStrictEqual } from 'node:util'

const here = dirname(fileURLToPath(import.meta.url))
export const ROOT = resolve(here, '..', '..')

let n = 0
let failed = 0
let daemon = null
let daemonExit = null // {code, signal} once it exited
let tmp = null
let logPath = null
let finishing = false
let pending = new Map()
let fdsAtStart = -1
let pooled = false // the file asked for a warm pool (HUTCH_POOL)
const runPending = process.env.HUTCH_E2E_RUN_PENDING === '1'
export const env = {} // url, key, port, stateDir, runDir

function line(s) {
  process.stdout.write(s + '\n')
}
export function diag(...parts) {
  for (const p of parts) {
    const s = typeof p === 'string' ? p : inspect(p, { depth: 4, breakLength: 120 })
    for (const l of s.split('\n')) line('# ' + l)
  }
}

// ---------- TAP ----------

function report(pass, name, directive = '') {
  n++
  if (!pass && !directive.startsWith(' # TODO')) failed++
  line(`${pass ? 'ok' : 'not ok'} ${n} - ${name.replace(/#/g, '\\#')}${directive}`)
  return pass
}
export function ok(cond, name, ...why) {
  const pass = report(!!cond, name)
  if (!pass && why.length) diag(...why)
  return pass
}
// skip(name, why): a check that does not run; todo(pass, name, why): one whose failure does not
// count (TAP's TODO), for a pending feature's check that ran.
export function skip(name, why) {
  return report(true, name, ` # SKIP ${why}`)
}
export function todo(pass, name, why) {
  return report(!!pass, name, ` # TODO ${why}`)
}
export function is(got, want, name) {
  const pass = report(isDeepStrictEqual(got, want), name)
  if (!pass) diag(`got:  ${inspect(got, { depth: 4 })}`, `want: ${inspect(want, { depth: 4 })}`)
  return pass
}
export function like(got, re, name) {
  const pass = report(typeof got === 'string' && re.test(got), name)
  if (!pass) diag(`got:  ${inspect(got)}`, `want match: ${re}`)
  return pass
}

// An error that stops a check: its message is the reason, shown as a diagnostic.
export class CheckFailed extends Error {}
// Assertions for use inside test(): they throw, so one check can assert several things.
export function assert(cond, msg = 'assertion failed') {
  if (!cond) throw new CheckFailed(msg)
}
export function eq(got, want, what = 'value') {
  if (!isDeepStrictEqual(got, want))
    throw new CheckFailed(`${what}: got ${inspect(got, { depth: 4 })}, want ${inspect(want, { depth: 4 })}`)
}
export function match(got, re, what = 'value') {
  if (typeof got !== 'string' || !re.test(got))
    throw new CheckFailed(`${what}: got ${inspect(got)}, want match ${re}`)
}
// rejects(promiseOrFn, Class or class name, what): the call must fail with that class (instanceof
// when a class is given, so a subclass counts; the exact name when a name is given); returns the
// error for further checks. A TimeoutError (a subclass of SandboxError) counts only when it is the
// class asked for: a call that hangs is never the refusal a check expects.
export async function rejects(p, cls, what = 'call') {
  let err = null
  try {
    await (typeof p === 'function' ? p() : p)
  } catch (e) {
    err = e
  }
  if (!err) throw new CheckFailed(`${what}: resolved, want a ${typeof cls === 'string' ? cls : cls.name}`)
  const name = typeof cls === 'string' ? cls : cls.name
  if ((typeof cls === 'string' ? err.name !== name : !(err instanceof cls)) ||
    (err.name === 'TimeoutError' && name !== 'TimeoutError'))
    throw new CheckFailed(`${what}: got ${err?.name}: ${err?.message}, want a ${name}`)
  return err
}
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
// waitFor(fn, ms): polls fn (every 100 ms) until it returns something truthy; its last value.
export async function waitFor(fn, ms = 10_000, step = 100) {
  const until = Date.now() + ms
  let v
  while (!(v = await fn()) && Date.now() < until) await sleep(step)
  return v
}

function withTimeout(p, ms, name) {
  let t
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise((_, rej) => {
      t = setTimeout(() => rej(new CheckFailed(`${name}: no answer within ${ms} ms`)), ms)
    }),
  ])
}

// test(name, fn, {timeoutMs}): one check; ok when fn resolves, not ok with the reason when it
// throws or does not end within timeoutMs (30 s). A name in PENDING is skipped (see above).
export async function test(name, fn, opts = {}) {
  if (finishing) return
  const why = pending.get(name)
  if (why !== undefined && !runPending) {
    skip(name, `pending: ${why}`)
    return
  }
  const t0 = Date.now()
  try {
    await withTimeout(Promise.resolve().then(fn), opts.timeoutMs ?? 30_000, name)
    report(true, name, why !== undefined ? ` # TODO pending: ${why}` : '')
  } catch (e) {
    report(false, name, why !== undefined ? ` # TODO pending: ${why}` : '')
    diag(e instanceof CheckFailed ? e.message : `${e?.name}: ${e?.message}`)
    if (!(e instanceof CheckFailed) && e?.stack) diag(e.stack.split('\n').slice(1, 6).join('\n'))
    daemonDied()
  }
  if (process.env.HUTCH_E2E_TIMES === '1') diag(`${name}: ${Date.now() - t0} ms`)
}

function daemonDied() {
  if (daemonExit) {
    diag(`the daemon exited (${JSON.stringify(daemonExit)}); its log:`)
    logTail()
  }
}
function logTail(lines = 40) {
  try {
    const l = readFileSync(logPath, 'utf8').split('\n')
    diag(l.slice(-lines).join('\n'))
  } catch {}
}

// ---------- the daemon ----------

// The daemon's open fds but its clients' connections (the SDK keeps its connections alive, so
// how many there are says nothing about the daemon): the sockets /proc/net/tcp shows established
// on the daemon's port.
function clientSockets() {
  const inodes = new Set()
  const port = env.port.toString(16).toUpperCase().padStart(4, '0')
  for (const t of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = ''
    try {
      text = readFileSync(t, 'utf8')
    } catch {}
    for (const row of text.split('\n').slice(1)) {
      const f = row.trim().split(/\s+/)
      if (f.length > 9 && f[1].endsWith(':' + port) && f[3] === '01') inodes.add(`socket:[${f[9]}]`)
    }
  }
  return inodes
}
function fdList() {
  const clients = clientSockets()
  try {
    return readdirSync(`/proc/${daemon.pid}/fd`)
      .map((f) => {
        try {
          return readlinkSync(`/proc/${daemon.pid}/fd/${f}`)
        } catch {
          return '?'
        }
      })
      .filter((l) => !clients.has(l))
  } catch {
    return []
  }
}
// How many spare disk layers the daemon has made (STATE/disk-pool/N/disk.img).
function diskSpares(stateDir) {
  try {
    return readdirSync(join(stateDir, 'disk-pool')).filter((n) => {
      try {
        return readdirSync(join(stateDir, 'disk-pool', n)).includes('disk.img')
      } catch {
        return false
      }
    }).length
  } catch {
    return 0
  }
}

function fdCount() {
  return fdList().length
}

// The daemon's fd count once it was the same in 3 reads 50 ms apart (at most 5 s).
async function steadyFdCount() {
  let last = fdCount()
  let same = 0
  for (let i = 0; i < 100 && same < 2; i++) {
    await sleep(50)
    const now = fdCount()
    same = now === last ? same + 1 : 0
    last = now
  }
  return last
}

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer()
    s.once('error', rej)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => res(port))
    })
  })
}

// api(method, path, body): a control-plane call with the key; {status, headers, json, text}.
export async function api(method, path, body, headers = {}) {
  const r = await fetch(env.url + path, {
    method,
    headers: { 'X-API-KEY': env.key, ...(body ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  })
  const text = await r.text()
  let json
  try {
    json = JSON.parse(text)
  } catch {}
  return { status: r.status, headers: r.headers, json, text }
}

// start({pending, budgetMs}): the daemon for this file. pending: {checkName: feature} (see
// above); budgetMs (150 s): the whole file's bound, past which it fails and cleans up.
export async function start(opts = {}) {
  pending = new Map(Object.entries(opts.pending ?? {}))
  pooled = (opts.env?.HUTCH_POOL ?? '0') !== '0'
  const budget = opts.budgetMs ?? 150_000
  setTimeout(() => crash(`the file did not end within ${budget / 1000} s`), budget).unref()
  process.on('uncaughtException', (e) => crash('uncaught exception', e))
  process.on('unhandledRejection', (e) => crash('unhandled rejection', e))
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => crash(`signal ${sig}`))
  // The last net: node exits without done() (process.exit, or a top-level await that never
  // settles once nothing else keeps it alive). Nothing async runs here, so a child node kills the
  // sandboxes through the API (they would outlive the daemon) while this one waits for it.
  process.on('exit', (code) => {
    if (finishing) return
    line(`not ok ${++n} - the file exited (status ${code}) before done()`)
    line(`1..${n}`)
    if (daemon && !daemonExit) {
      spawnSync(process.execPath, ['--input-type=module', '-e', killAllScript], {
        env: { ...process.env, HUTCH_E2E_URL: env.url, HUTCH_E2E_KEY: env.key },
        stdio: 'ignore',
        timeout: 30_000,
      })
      daemon.kill('SIGTERM')
    }
    if (tmp) rmSync(tmp, { recursive: true, force: true })
    process.exitCode = 1
  })
  const bin = process.env.HUTCH_E2E_BIN || join(ROOT, 'build', 'hutch-san')
  tmp = mkdtempSync(join(tmpdir(), 'hutch-e2e.'))
  chmodSync(tmp, 0o755)
  const port = await freePort()
  const key = 'e2e-' + randomBytes(12).toString('hex')
  Object.assign(env, {
    port,
    key,
    url: `http://127.0.0.1:${port}`,
    stateDir: join(tmp, 'state'),
    runDir: join(tmp, 'run'),
  })
  logPath = join(tmp, 'daemon.log')
  const log = openSync(logPath, 'a')
  daemon = spawn(bin, ['serve', '--listen', `127.0.0.1:${port}`], {
    stdio: ['ignore', log, log],
    env: {
      ...process.env,
      HUTCH_STATE_DIR: env.stateDir,
      HUTCH_RUN_DIR: env.runDir,
      HUTCH_API_KEY: key,
      // the warm pool (src/serve/pool.h) only where a file asks for it: its sandboxes hold fds
      HUTCH_POOL: '0',
      ...(opts.env ?? {}),
      ASAN_OPTIONS: process.env.ASAN_OPTIONS ?? 'detect_leaks=1:abort_on_error=0',
      UBSAN_OPTIONS: process.env.UBSAN_OPTIONS ?? 'print_stacktrace=1:halt_on_error=1',
    },
  })
  closeSync(log)
  daemon.on('exit', (code, signal) => (daemonExit = { code, signal }))
  daemon.on('error', (e) => (daemonExit = { error: e.message }))
  let up = false
  for (let i = 0; i < 150 && !daemonExit && !up; i++) {
    try {
      up = (await fetch(env.url + '/health', { signal: AbortSignal.timeout(1000) })).ok
    } catch {}
    if (!up) await sleep(100)
  }
  if (!up) {
    report(false, `the daemon (${bin}) answers /health on 127.0.0.1:${port}`)
    if (daemonExit) daemonDied()
    else logTail()
    await done()
    return
  }
  // the disk pool (src/serve/disk_pool.h) full first: a spare being made holds 3 fds, and the
  // last one's 2 until the fsync after its image got its name; then the count must hold still
  const spares = parseInt(opts.env?.HUTCH_DISK_POOL ?? '4', 10)
  await waitFor(() => diskSpares(env.stateDir) >= spares, 20_000)
  fdsAtStart = await steadyFdCount()
  process.env.E2B_API_KEY = key
  process.env.E2B_API_URL = env.url
  process.env.E2B_SANDBOX_URL = env.url
  process.env.E2B_DOMAIN = 'hutch.invalid'
  delete process.env.E2B_DEBUG
  delete process.env.E2B_ACCESS_TOKEN
}

// Every sandbox the daemon holds, running or paused, through the API's pages.
async function allSandboxes() {
  const ids = []
  let next = ''
  for (let i = 0; i < 100; i++) {
    const r = await api('GET', `/v2/sandboxes?state=running,paused&limit=100${next ? '&nextToken=' + next : ''}`)
    if (r.status !== 200) throw new Error(`list: ${r.status} ${r.text}`)
    ids.push(...r.json.map((s) => s.sandboxID))
    next = r.headers.get('x-next-token')
    if (!next) break
  }
  return ids
}

const killAllScript = `
const u = process.env.HUTCH_E2E_URL, h = { 'X-API-KEY': process.env.HUTCH_E2E_KEY }
for (let i = 0; i < 20; i++) {
  const l = await (await fetch(u + '/v2/sandboxes?state=running,paused&limit=1000', { headers: h })).json()
  if (!l.length) break
  for (const s of l) await fetch(u + '/sandboxes/' + s.sandboxID, { method: 'DELETE', headers: h })
}`

async function cleanup() {
  if (daemon && !daemonExit) {
    let left = null
    try {
      for (const id of await allSandboxes()) await api('DELETE', `/sandboxes/${id}`)
      left = await allSandboxes()
    } catch (e) {
      left = [`(${e.message})`]
    }
    report(left?.length === 0, 'every sandbox is killed through the API at the end')
    if (left?.length) diag(`left: ${left.join(' ')}`)
    // every sandbox's fds (init's socket, pidfds, output pipes) are closed once it is gone; with
    // a warm pool, its sandboxes (nobody's) keep theirs until the daemon's stop kills them
    if (!pooled) {
      const fds = await waitFor(() => (fdCount() === fdsAtStart ? fdsAtStart : 0), 3_000)
      if (!report(fds === fdsAtStart, `the daemon holds as many fds as at its start (${fdsAtStart})`))
        diag(`now ${fdCount()}: ${fdList()}`)
    }
    daemon.kill('SIGTERM')
    const exited = await waitFor(() => daemonExit, 20_000)
    if (pooled) {
      let records = []
      try {
        records = readdirSync(env.runDir).filter((f) => f.endsWith('.sandbox'))
      } catch {}
      report(exited && records.length === 0, "the daemon's stop killed its warm pool (no sandbox record left)")
      if (records.length) diag(`left: ${records.join(' ')}`)
    }
    if (!exited) {
      daemon.kill('SIGKILL')
      await waitFor(() => daemonExit, 5_000)
    }
    let log = ''
    try {
      log = readFileSync(logPath, 'utf8')
    } catch {}
    const sanitizer = /(ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:)/.test(log)
    const clean = exited && daemonExit.code === 0 && !sanitizer
    report(clean, 'the daemon stops on SIGTERM with status 0 and no sanitizer report')
    if (!clean) {
      diag(`exit: ${JSON.stringify(daemonExit)}`)
      logTail(60)
    }
  } else if (daemon) {
    report(false, 'the daemon ran to the end of the tests')
    daemonDied()
  }
  if (tmp) rmSync(tmp, { recursive: true, force: true })
  tmp = null
}

async function crash(what, e) {
  if (finishing) return
  report(false, e === undefined ? what : `${what}: ${e?.name ?? ''} ${e?.message ?? e}`)
  if (e?.stack) diag(e.stack)
  await done()
}

// done(): cleanup, the plan, and the exit status.
export async function done() {
  if (finishing) return
  finishing = true
  const guard = setTimeout(() => {
    line(`not ok ${++n} - cleanup did not end within 60 s`)
    line(`1..${n}`)
    if (daemon && !daemonExit) daemon.kill('SIGKILL')
    process.exit(1)
  }, 60_000)
  try {
    await cleanup()
  } catch (e) {
    report(false, `cleanup: ${e?.message}`)
  }
  clearTimeout(guard)
  line(`1..${n}`)
  process.exit(failed ? 1 : 0)
}
