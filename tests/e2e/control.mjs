// The control plane through the SDK: create (metadata, envs, timeout), getInfo, list (state and
// metadata filters, paging with the SDK's paginator), kill, setTimeout, pause and resume
// (connect), autoPause and autoResume, the errors the SDK turns into its classes, and hostile
// input.
import { Sandbox, SandboxError, SandboxNotFoundError, AuthenticationError, InvalidArgumentError } from 'e2b'
import { start, done, test, assert, eq, match, rejects, sleep, waitFor, api, env } from './harness.mjs'

const PENDING = {
}

await start({ pending: PENDING })
const tag = `control-${process.pid}`
const tmo = 120_000
let a, b, c

await test('create with metadata, envs and a timeout', async () => {
  const t0 = Date.now()
  a = await Sandbox.create({ metadata: { suite: tag, name: 'a' }, envs: { HELLO: 'world' }, timeoutMs: tmo })
  match(a.sandboxId, /^[a-z0-9]{20}$/, 'sandboxId')
  const info = await a.getInfo()
  eq(info.sandboxId, a.sandboxId, 'getInfo().sandboxId')
  eq(info.metadata, { suite: tag, name: 'a' }, 'metadata')
  eq(info.state, 'running', 'state')
  const left = info.endAt.getTime() - t0
  assert(left > tmo - 15_000 && left <= tmo + 15_000, `endAt is the timeout from now: ${left} ms`)
  const r = await a.commands.run('echo $HELLO')
  eq(r.stdout, 'world\n', 'the env var in a command')
})

await test('getInfo: template, resources, envd version, start time', async () => {
  const info = await Sandbox.getInfo(a.sandboxId)
  eq(info.templateId, 'base', 'templateId')
  assert(info.cpuCount >= 1 && info.memoryMB >= 128, `cpuCount ${info.cpuCount}, memoryMB ${info.memoryMB}`)
  match(info.envdVersion, /^\d+\.\d+\.\d+$/, 'envdVersion')
  assert(Math.abs(info.startedAt.getTime() - Date.now()) < 60_000, `startedAt ${info.startedAt.toISOString()}`)
  assert(info.endAt > info.startedAt, 'endAt after startedAt')
})

await test('two more sandboxes; each gets its own id', async () => {
  ;[b, c] = await Promise.all([
    Sandbox.create({ metadata: { suite: tag, name: 'b' }, timeoutMs: tmo }),
    Sandbox.create({ metadata: { suite: tag, name: 'c', odd: 'a=b&c d/é' }, timeoutMs: tmo }),
  ])
  eq(new Set([a.sandboxId, b.sandboxId, c.sandboxId]).size, 3, 'distinct ids')
})

await test('list filtered by metadata: exactly ours, newest first', async () => {
  const items = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
  eq(items.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId, c.sandboxId].sort(), 'ids')
  eq(items[items.length - 1].sandboxId, a.sandboxId, 'the oldest last')
  const one = await Sandbox.list({ query: { metadata: { suite: tag, name: 'b' } } }).nextItems()
  eq(one.map((s) => s.sandboxId), [b.sandboxId], 'two keys: only b')
  const odd = await Sandbox.list({ query: { metadata: { odd: 'a=b&c d/é' } } }).nextItems()
  eq(odd.map((s) => s.sandboxId), [c.sandboxId], 'a value with = & space / and UTF-8')
  const none = await Sandbox.list({ query: { metadata: { suite: 'no-such-' + tag } } }).nextItems()
  eq(none, [], 'no match: an empty page')
})

await test('list paging with the paginator: limit 2 over 3 sandboxes', async () => {
  const p = Sandbox.list({ query: { metadata: { suite: tag } }, limit: 2 })
  eq(p.hasNext, true, 'hasNext before the first page')
  const first = await p.nextItems()
  eq(first.length, 2, 'the first page has 2')
  eq(p.hasNext, true, 'hasNext after the first page')
  const second = await p.nextItems()
  eq(p.hasNext, false, 'hasNext after the last page')
  const ids = [...first, ...second].map((s) => s.sandboxId)
  eq(ids.length, 3, 'three in all')
  eq(new Set(ids).size, 3, 'none twice')
  const all = Sandbox.list({ limit: 1 })
  const seen = []
  while (all.hasNext && seen.length < 50) seen.push(...(await all.nextItems()).map((s) => s.sandboxId))
  for (const id of [a.sandboxId, b.sandboxId, c.sandboxId]) assert(seen.includes(id), `${id} on some page of all`)
  eq(new Set(seen).size, seen.length, 'no sandbox on two pages')
  const asc = await Sandbox.list({ query: { metadata: { suite: tag } }, order: 'asc' }).nextItems()
  eq(asc[0].sandboxId, a.sandboxId, "order 'asc': the oldest first")
})

await test('setTimeout moves endAt', async () => {
  await b.setTimeout(30_000)
  const info = await b.getInfo()
  const left = info.endAt.getTime() - Date.now()
  assert(left > 15_000 && left <= 31_000, `endAt ${left} ms from now`)
  await b.setTimeout(tmo)
  const later = await b.getInfo()
  assert(later.endAt.getTime() - Date.now() > 60_000, 'extended again')
})

await test('pause: paused in getInfo and in the state filter; envd unreachable', async () => {
  await b.files.write('/home/user/kept.txt', 'before the pause')
  eq(await b.pause(), true, 'pause()')
  eq((await b.getInfo()).state, 'paused', 'state')
  const paused = await Sandbox.list({ query: { metadata: { suite: tag }, state: ['paused'] } }).nextItems()
  eq(paused.map((s) => s.sandboxId), [b.sandboxId], "state ['paused']")
  const running = await Sandbox.list({ query: { metadata: { suite: tag }, state: ['running'] } }).nextItems()
  eq(running.map((s) => s.sandboxId).sort(), [a.sandboxId, c.sandboxId].sort(), "state ['running']")
  eq(await b.isRunning(), false, 'isRunning() while paused')
})

await test('pause of a paused sandbox: false', async () => {
  eq(await b.pause(), false, 'the second pause()')
  eq(await Sandbox.pause(b.sandboxId), false, 'Sandbox.pause(id)')
})

await test('connect resumes: running, files kept, the same envd token works', async () => {
  const again = await Sandbox.connect(b.sandboxId, { timeoutMs: tmo })
  eq((await again.getInfo()).state, 'running', 'state after connect')
  eq(await again.isRunning(), true, 'isRunning()')
  eq(await again.files.read('/home/user/kept.txt'), 'before the pause', 'the file')
  eq(await b.files.read('/home/user/kept.txt'), 'before the pause', 'through the old handle too')
  const same = await Sandbox.connect(b.sandboxId)
  eq(same.sandboxId, b.sandboxId, 'connect to a running one')
})

await test('kill: true, then false; gone from getInfo and list', async () => {
  eq(await c.kill(), true, 'kill()')
  eq(await Sandbox.kill(c.sandboxId), false, 'Sandbox.kill(id) again')
  await rejects(Sandbox.getInfo(c.sandboxId), SandboxNotFoundError, 'getInfo of a killed one')
  const items = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
  assert(!items.some((s) => s.sandboxId === c.sandboxId), 'not listed')
  eq(await c.isRunning(), false, 'isRunning()')
})

await test('the deadline kills a sandbox (timeout 2 s)', async () => {
  const s = await Sandbox.create({ timeoutMs: 2_000 })
  eq(await s.isRunning(), true, 'running at first')
  const gone = await waitFor(async () => {
    try {
      await Sandbox.getInfo(s.sandboxId)
      return false
    } catch (e) {
      return e instanceof SandboxNotFoundError
    }
  }, 10_000, 250)
  assert(gone, 'still there 10 s after its 2 s deadline')
})

await test("autoPause: lifecycle onTimeout 'pause' pauses at the deadline; connect resumes", async () => {
  const s = await Sandbox.create({ timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } })
  await s.files.write('/home/user/x', 'kept')
  eq((await s.getInfo()).lifecycle?.onTimeout, 'pause', 'lifecycle.onTimeout')
  const paused = await waitFor(async () => (await s.getInfo()).state === 'paused', 10_000, 250)
  assert(paused, 'not paused 10 s after its 2 s deadline')
  const r = await Sandbox.connect(s.sandboxId, { timeoutMs: 60_000 })
  eq((await r.getInfo()).state, 'running', 'running after connect')
  eq(await r.files.read('/home/user/x'), 'kept', 'its file')
  await r.kill()
})

await test('autoResume: a paused sandbox wakes on its next envd request', async () => {
  const s = await Sandbox.create({ timeoutMs: 60_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  eq((await s.getInfo()).lifecycle?.autoResume, true, 'lifecycle.autoResume')
  eq(await s.pause(), true, 'pause()')
  const r = await s.commands.run('echo awake')
  eq(r.stdout, 'awake\n', 'a command on the paused sandbox')
  eq((await s.getInfo()).state, 'running', 'running again')
  await s.kill()
})

await test('getMetrics: samples within 30 s of creation', async () => {
  const m = await waitFor(async () => {
    const l = await a.getMetrics()
    return l.length ? l : null
  }, 30_000, 1000)
  assert(m, 'no metrics')
  assert(m[0].cpuCount >= 1 && m[0].memTotal > 0, JSON.stringify(m[0]))
}, { timeoutMs: 40_000 })

await test('pause({keepMemory: false}): files kept, processes gone, a new boot id', async () => {
  const boot = (await a.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout
  await a.commands.run('sleep 600', { background: true })
  await a.files.write('/home/user/cold.txt', 'cold')
  eq(await a.pause({ keepMemory: false }), true, 'pause')
  const r = await Sandbox.connect(a.sandboxId)
  eq(await r.files.read('/home/user/cold.txt'), 'cold', 'the file')
  eq((await r.commands.list()).length, 0, 'no processes')
  assert((await r.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout !== boot, 'the same boot id')
})

await test('connect({onResume: "reboot"}) of a paused sandbox: memory dropped, files kept, a new boot id', async () => {
  const boot = (await a.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout
  await a.commands.run('sleep 600', { background: true })
  await a.files.write('/home/user/reboot.txt', 'kept')
  eq(await a.pause(), true, 'pause (with memory)')
  const r = await Sandbox.connect(a.sandboxId, { onResume: 'reboot' })
  eq((await Sandbox.getInfo(a.sandboxId)).state, 'running', 'running again')
  eq(await r.files.read('/home/user/reboot.txt'), 'kept', 'the file')
  eq((await r.commands.list()).length, 0, 'no process of before')
  assert((await r.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout !== boot, 'the same boot id')
  const again = await Sandbox.connect(a.sandboxId, { onResume: 'reboot' })
  eq((await again.commands.run('echo up')).stdout, 'up\n', 'a reboot connect of a running one just connects')
})

await test('onTimeout {action: "pause", keepMemory: false}: the deadline pauses without memory', async () => {
  const s = await Sandbox.create({ timeoutMs: 4_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } })
  await s.files.write('/home/user/deadline.txt', 'kept')
  await s.commands.run('sleep 600', { background: true })
  const paused = await waitFor(async () => (await Sandbox.getInfo(s.sandboxId)).state === 'paused', 15_000, 250)
  assert(paused, 'paused at its deadline')
  const r = await Sandbox.connect(s.sandboxId)
  eq(await r.files.read('/home/user/deadline.txt'), 'kept', 'the file after the connect')
  eq((await r.commands.list()).length, 0, 'its processes did not live through the pause')
  await r.kill()
}, { timeoutMs: 40_000 })

await test('autoPauseMemory: false with autoResume: 400', async () => {
  const r = await api('POST', '/v2/sandboxes',
    { templateID: 'base', autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } })
  eq(r.status, 400, 'status')
  match(r.json?.message ?? '', /autoPauseMemory/, 'says why')
})

// ---------- errors ----------

await test('unknown sandbox: SandboxNotFoundError from getInfo, connect, setTimeout, pause; kill false', async () => {
  const id = 'a'.repeat(20)
  await rejects(Sandbox.getInfo(id), SandboxNotFoundError, 'getInfo')
  await rejects(Sandbox.connect(id), SandboxNotFoundError, 'connect')
  await rejects(Sandbox.setTimeout(id, 10_000), SandboxNotFoundError, 'setTimeout')
  await rejects(Sandbox.pause(id), SandboxNotFoundError, 'pause')
  eq(await Sandbox.kill(id), false, 'kill')
})

await test("bad template: a SandboxError with status 404 that names it", async () => {
  const e = await rejects(Sandbox.create('no-such-template-zz'), SandboxError, 'create')
  eq(e.statusCode, 404, 'statusCode')
  match(e.message, /no-such-template-zz/, 'message')
})

await test('a wrong API key: AuthenticationError', async () => {
  await rejects(Sandbox.create({ apiKey: 'wrong-key' }), AuthenticationError, 'create')
  await rejects(Sandbox.list({ apiKey: 'wrong-key' }).nextItems(), AuthenticationError, 'list')
  await rejects(Sandbox.kill(a.sandboxId, { apiKey: 'wrong-key' }), AuthenticationError, 'kill')
  eq((await a.getInfo()).state, 'running', 'the sandbox is untouched')
})

await test('hostile input through the SDK: 400 with a reason, nothing created', async () => {
  const before = (await Sandbox.list().nextItems()).length
  const big = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, 'v']))
  let e = await rejects(Sandbox.create({ metadata: big }), SandboxError, 'too many metadata entries')
  eq(e.statusCode, 400, 'statusCode (metadata)')
  e = await rejects(Sandbox.create({ envs: { 'BAD NAME': 'x' } }), SandboxError, 'an env var name with a space')
  eq(e.statusCode, 400, 'statusCode (envs)')
  e = await rejects(Sandbox.create({ metadata: { k: 'v'.repeat(100_000) } }), SandboxError, 'a 100 kB value')
  eq(e.statusCode, 400, 'statusCode (value)')
  e = await rejects(Sandbox.create({ timeoutMs: 1e12 }), SandboxError, 'a timeout of 30 years')
  eq(e.statusCode, 400, 'statusCode (timeout)')
  e = await rejects(a.setTimeout(-5000), SandboxError, 'a negative setTimeout')
  eq(e.statusCode, 400, 'statusCode (setTimeout)')
  await rejects(Sandbox.create({ lifecycle: { onTimeout: 'explode' } }), InvalidArgumentError, 'a bad onTimeout (the SDK)')
  eq((await Sandbox.list().nextItems()).length, before, 'no sandbox was created')
})

await test('hostile input by hand: bad ids, bodies and queries get E2B error bodies', async () => {
  for (const [m, p, body] of [
    ['GET', '/sandboxes/..%2F..%2Fetc%2Fpasswd'],
    ['GET', '/sandboxes/' + 'x'.repeat(5000)],
    ['POST', `/sandboxes/${a.sandboxId}/timeout`, '{"timeout":"soon"}'],
    ['POST', `/sandboxes/${a.sandboxId}/timeout`, '[1,2'],
    ['POST', '/v2/sandboxes', '{"templateID":"base","metadata":{"a":1}}'],
    ['POST', '/v2/sandboxes', '{"templateID":"base","templateID":"base"}'],
    ['GET', '/v2/sandboxes?limit=-1'],
    ['GET', '/v2/sandboxes?state=exploded'],
    ['GET', '/v2/sandboxes?metadata=%ZZ'],
  ]) {
    const r = await api(m, p, body)
    assert(r.status >= 400 && r.status < 500, `${m} ${p.slice(0, 60)} ${body ?? ''}: ${r.status} ${r.text.slice(0, 200)}`)
    assert(r.json && r.json.code === r.status && typeof r.json.message === 'string' && r.json.message.length > 0,
      `${m} ${p.slice(0, 60)}: not E2B's error shape: ${r.text.slice(0, 200)}`)
  }
  eq((await a.getInfo()).state, 'running', 'the daemon still serves')
})

await done()
