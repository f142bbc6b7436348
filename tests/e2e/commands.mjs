// Commands and ptys through the SDK: foreground and background, exit codes, stdin, env vars, cwd,
// the user, killing a background command's whole tree, connecting by pid (its output replayed),
// list, sendStdin, a pty (input, resize, kill), two sandboxes at once, a background command that
// lives through a pause and a resume, and hostile input.
import { Sandbox, CommandExitError, SandboxError, NotFoundError, TimeoutError, InvalidArgumentError, AuthenticationError } from 'e2b'
import { start, done, test, assert, eq, match, rejects, sleep, waitFor } from './harness.mjs'

const PENDING = {
}

await start({ pending: PENDING })
const sbx = await Sandbox.create({ envs: { SANDBOX_VAR: 'from-create', BOTH: 'sandbox' }, timeoutMs: 180_000 })
const dec = new TextDecoder()

await test('run in the foreground: stdout, stderr, exit code 0, output callbacks', async () => {
  const out = []
  const err = []
  const r = await sbx.commands.run('echo out; echo err >&2; printf "%s" "$((6*7))"', {
    onStdout: (d) => out.push(d),
    onStderr: (d) => err.push(d),
  })
  eq(r.exitCode, 0, 'exitCode')
  eq(r.stdout, 'out\n42', 'stdout')
  eq(r.stderr, 'err\n', 'stderr')
  eq(out.join(''), 'out\n42', 'onStdout')
  eq(err.join(''), 'err\n', 'onStderr')
})

await test('a non-zero exit: CommandExitError with its code and output', async () => {
  const e = await rejects(sbx.commands.run('echo partial; echo bad >&2; exit 42'), CommandExitError, 'run')
  eq(e.exitCode, 42, 'exitCode')
  eq(e.stdout, 'partial\n', 'stdout')
  eq(e.stderr, 'bad\n', 'stderr')
  const k = await rejects(sbx.commands.run('kill -9 $$'), CommandExitError, 'a command killed by a signal')
  assert(k.exitCode !== 0, `exitCode ${k.exitCode}`)
})

await test('env vars: the sandbox\'s, the command\'s, the command\'s win', async () => {
  const r = await sbx.commands.run('echo "$SANDBOX_VAR $CMD_VAR $BOTH"', { envs: { CMD_VAR: 'from-run', BOTH: 'command' } })
  eq(r.stdout, 'from-create from-run command\n', 'stdout')
  const again = await sbx.commands.run('echo "[$CMD_VAR] $BOTH"')
  eq(again.stdout, '[] sandbox\n', 'a command env var stays in its command')
})

await test('cwd: default home, given, and a missing one refused', async () => {
  eq((await sbx.commands.run('pwd')).stdout, '/home/user\n', 'default')
  eq((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n', 'cwd /tmp')
  eq((await sbx.commands.run('pwd', { cwd: '/', user: 'root' })).stdout, '/\n', 'cwd / as root')
  const e = await rejects(sbx.commands.run('pwd', { cwd: '/no/such/dir' }), InvalidArgumentError, 'a missing cwd')
  match(e.message, /\/no\/such\/dir/, 'the reason names it')
})

await test('the user: "user" (uid 1000) by default, root when asked', async () => {
  eq((await sbx.commands.run('id -un; id -u; echo $HOME')).stdout, 'user\n1000\n/home/user\n', 'default')
  eq((await sbx.commands.run('id -un; id -u; echo $HOME', { user: 'root' })).stdout, 'root\n0\n/root\n', 'root')
  const e = await rejects(sbx.commands.run('touch /root/nope'), CommandExitError, 'user writes in /root')
  match(e.stderr, /Permission denied/, 'stderr')
  await sbx.commands.run('touch /root/yes', { user: 'root' })
  // envd answers unauthenticated for a user it does not have
  await rejects(sbx.commands.run('true', { user: 'nobody-such-user' }), AuthenticationError, 'an unknown user')
})

await test('stdin: sendStdin to a background command, then closeStdin', async () => {
  const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'hello ')
  await h.sendStdin(new TextEncoder().encode('world\n'))
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  eq(r.stdout, 'hello world\ndone\n', 'stdout')
  const plain = await sbx.commands.run('cat; echo eof')
  eq(plain.stdout, 'eof\n', 'without stdin: cat sees end of file at once')
})

await test('background: listed with its command, killed with its whole process tree', async () => {
  const marker = 1000 + (process.pid % 997)
  const h = await sbx.commands.run(`sleep ${marker} & (sleep ${marker}; true) & sleep ${marker}; wait`, {
    background: true,
    cwd: '/tmp',
    envs: { LISTED: 'yes' },
  })
  assert(h.pid > 0, `pid ${h.pid}`)
  const n = await waitFor(async () => {
    const r = await sbx.commands.run(`pgrep -c -f "^sleep ${marker}$" || true`)
    return Number(r.stdout.trim()) >= 3 && r.stdout
  }, 10_000)
  assert(n, 'three sleeps did not start')
  const p = (await sbx.commands.list()).find((x) => x.pid === h.pid)
  assert(p, `pid ${h.pid} not in list()`)
  eq(p.cmd, '/bin/bash', 'cmd')
  assert(p.args.join(' ').includes(`sleep ${marker}`), `args ${JSON.stringify(p.args)}`)
  eq(p.envs.LISTED, 'yes', 'its env var in list()')
  eq(p.cwd, '/tmp', 'cwd')
  eq(await h.kill(), true, 'kill()')
  const e = await rejects(h.wait(), CommandExitError, 'wait() after kill')
  assert(e.exitCode !== 0, `exitCode ${e.exitCode}`)
  const left = await waitFor(async () => {
    const r = await sbx.commands.run(`pgrep -c -f "^sleep ${marker}$" || true`)
    return r.stdout.trim() === '0'
  }, 10_000)
  assert(left, 'a child of the killed command is still alive')
  assert(!(await sbx.commands.list()).some((x) => x.pid === h.pid), 'still listed after kill')
  eq(await sbx.commands.kill(h.pid), false, 'kill() again: false')
  eq(await sbx.commands.kill(999_999), false, 'kill() of an unknown pid: false')
})

await test('connect by pid: the output so far replayed, then the rest, then its end', async () => {
  const h = await sbx.commands.run('echo one; echo err-one >&2; read x; echo two $x; exit 3', { background: true, stdin: true })
  await waitFor(() => h.stdout.includes('one\n'), 10_000)
  await h.disconnect()
  const got = []
  const c = await sbx.commands.connect(h.pid, { onStdout: (d) => got.push(d) })
  eq(c.pid, h.pid, 'pid')
  await waitFor(() => got.join('').includes('one\n'), 10_000)
  await sbx.commands.sendStdin(h.pid, 'later\n')
  const e = await rejects(c.wait(), CommandExitError, 'wait()')
  eq(e.exitCode, 3, 'exitCode')
  eq(got.join(''), 'one\ntwo later\n', 'onStdout: replayed and live')
  eq(e.stdout, 'one\ntwo later\n', 'stdout')
  match(e.stderr, /err-one/, 'stderr replayed')
  await rejects(sbx.commands.connect(999_999), NotFoundError, 'connect to an unknown pid')
})

await test('the run timeout kills a long command', async () => {
  const t0 = Date.now()
  await rejects(sbx.commands.run('sleep 30', { timeoutMs: 1500 }), TimeoutError, 'run')
  assert(Date.now() - t0 < 10_000, `took ${Date.now() - t0} ms`)
  const left = await waitFor(async () => (await sbx.commands.run('pgrep -c -x -f "sleep 30" || true')).stdout.trim() === '0', 10_000)
  assert(left, 'the command outlived its timeout')
})

await test('pty: create, input, resize, kill', async () => {
  let out = ''
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (out += dec.decode(d, { stream: true })), envs: { PTYVAR: 'pv' } })
  assert(h.pid > 0, `pid ${h.pid}`)
  const enc = new TextEncoder()
  await sbx.pty.sendInput(h.pid, enc.encode('tty; echo "v=$PTYVAR $((6*7))"; stty size\n'))
  assert(await waitFor(() => /v=pv 42/.test(out) && /24 80/.test(out), 10_000), `output: ${JSON.stringify(out)}`)
  match(out, /\/dev\/pts\/\d+/, 'a terminal')
  await sbx.pty.resize(h.pid, { cols: 132, rows: 50 })
  await sbx.pty.sendInput(h.pid, enc.encode('stty size\n'))
  assert(await waitFor(() => /50 132/.test(out), 10_000), `after resize: ${JSON.stringify(out.slice(-200))}`)
  assert((await sbx.commands.list()).some((p) => p.pid === h.pid), 'the pty is listed')
  eq(await sbx.pty.kill(h.pid), true, 'kill()')
  await rejects(h.wait(), CommandExitError, 'wait() after kill')
  eq(await sbx.pty.kill(h.pid), false, 'kill() again: false')
})

await test('pty: sudo gets a terminal of its own (/dev/tty, input, size, resize, ^C), ours comes back, a writer left behind does not hold it', async () => {
  let out = ''
  const h = await sbx.pty.create({ cols: 100, rows: 30, onData: (d) => (out += dec.decode(d, { stream: true })) })
  const enc = new TextEncoder()
  const send = (s) => sbx.pty.sendInput(h.pid, enc.encode(s))
  // read from /dev/tty: only a command with a controlling terminal can open it
  await send('sudo sh -c \'read -r w </dev/tty; echo "got=$w uid=$(id -u) size=$(stty size)"\'\n')
  await sleep(500)
  await send('hello\r')
  assert(await waitFor(() => /got=hello uid=0 size=30 100/.test(out), 10_000), `output: ${JSON.stringify(out.slice(-300))}`)
  // a resize while sudo runs reaches the command's pty
  await send('sudo sh -c \'read -r w; stty size\'\n')
  await sleep(500)
  await sbx.pty.resize(h.pid, { cols: 120, rows: 40 })
  await sleep(300)
  await send('go\r')
  assert(await waitFor(() => /40 120/.test(out), 10_000), `after resize: ${JSON.stringify(out.slice(-300))}`)
  // ^C goes through the command's terminal: sudo ends as the command did (SIGINT: 130)
  // (the shell drops the rest of a line whose job died of SIGINT: the echo is a line of its own)
  await send('sudo sleep 60\n')
  await sleep(700)
  await send('\x03')
  await sleep(300)
  await send('echo "rc=$?"\n')
  assert(await waitFor(() => /rc=130/.test(out), 10_000), `after ^C: ${JSON.stringify(out.slice(-300))}`)
  // our terminal's modes are ours again (sudo set it raw while it relayed)
  await send('stty -a | tr " ;" "\\n\\n" | grep -x -e icanon -e -icanon -e echo -e -echo | tr "\\n" " "; echo END\n')
  assert(await waitFor(() => /icanon echo END/.test(out), 10_000), `modes after: ${JSON.stringify(out.slice(-300))}`)
  // a process the command left behind that goes on writing to its pty does not keep sudo alive
  await send('sudo sh -c \'trap \"\" HUP; (while :; do echo spam; sleep 0.02; done) & echo started\'; echo "sudo-ended=$?"\n')
  assert(await waitFor(() => /sudo-ended=0/.test(out), 10_000), `with a writer left behind: ${JSON.stringify(out.slice(-300))}`)
  await sbx.pty.kill(h.pid) // its group: the writer too
})

await test('pty: exit ends it with its code', async () => {
  let out = ''
  const h = await sbx.pty.create({ cols: 40, rows: 10, onData: (d) => (out += dec.decode(d)) })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('exit 5\n'))
  const e = await rejects(h.wait(), CommandExitError, 'wait()')
  eq(e.exitCode, 5, 'exitCode')
})

await test('two sandboxes at once: each its own files, env and processes', async () => {
  const other = await Sandbox.create({ envs: { WHO: 'other' }, timeoutMs: 60_000 })
  await Promise.all([
    sbx.files.write('/tmp/who', 'first'),
    other.files.write('/tmp/who', 'second'),
  ])
  const [r1, r2] = await Promise.all([
    sbx.commands.run('for i in 1 2 3; do cat /tmp/who; sleep 0.1; done; echo " $WHO"'),
    other.commands.run('for i in 1 2 3; do cat /tmp/who; sleep 0.1; done; echo " $WHO"'),
  ])
  eq(r1.stdout, 'firstfirstfirst \n', 'the first')
  eq(r2.stdout, 'secondsecondsecond other\n', 'the second')
  const h = await other.commands.run('sleep 77', { background: true })
  assert(!(await sbx.commands.list()).some((p) => p.args.join(' ').includes('sleep 77')), "the other's command is not listed here")
  // pids are per sandbox: the same number may be a command of this one's, then nothing is shown
  if (!(await sbx.commands.list()).some((p) => p.pid === h.pid))
    eq(await sbx.commands.kill(h.pid), false, "the other's pid cannot be killed from here")
  assert((await other.commands.list()).some((p) => p.pid === h.pid), 'and it still runs there')
  await other.kill()
})

await test('a background command lives through pause and resume, its pid still listed', async () => {
  const h = await sbx.commands.run('for i in $(seq 1 12); do echo tick $i; sleep 0.25; done', { background: true })
  await waitFor(() => h.stdout.includes('tick 2'), 10_000)
  eq(await sbx.pause(), true, 'pause()')
  await sleep(500)
  const r = await Sandbox.connect(sbx.sandboxId)
  assert((await r.commands.list()).some((p) => p.pid === h.pid), `pid ${h.pid} not listed after resume`)
  const c = await r.commands.connect(h.pid)
  const res = await c.wait()
  eq(res.exitCode, 0, 'exitCode')
  match(res.stdout, /tick 1\n[^]*tick 12\n$/, 'all its output')
}, { timeoutMs: 40_000 })

await test('sudo: the user runs a command as root', async () => {
  eq((await sbx.commands.run('sudo -n id -u')).stdout, '0\n', 'sudo -n id -u')
})

// ---------- hostile input ----------

await test('a large output (8 MiB) and bytes that are not UTF-8 arrive whole', async () => {
  const r = await sbx.commands.run('head -c 8388608 /dev/zero | tr "\\0" x')
  eq(r.stdout.length, 8 << 20, 'stdout length')
  const b = await sbx.commands.run('printf "a\\377\\376b"')
  eq(b.stdout, 'a\ufffd\ufffdb', 'invalid UTF-8 decoded as U+FFFD')
}, { timeoutMs: 60_000 })

await test('hostile input: a huge command, NUL bytes, odd env names, a pid out of range', async () => {
  const big = 'echo ' + 'y'.repeat(100_000) + ' | wc -c'
  eq((await sbx.commands.run(big)).stdout, '100001\n', 'a 100 kB command line')
  // one argument of more than 128 KiB is more than execve takes (MAX_ARG_STRLEN): refused with why
  const e = await rejects(sbx.commands.run('echo ' + 'y'.repeat(200_000)), InvalidArgumentError, 'a 200 kB command line')
  match(e.message, /longer than/, 'the reason')
  await rejects(sbx.commands.run('echo a\0b'), SandboxError, 'a NUL in the command')
  await rejects(sbx.commands.run('true', { envs: { 'A=B': 'x' } }), SandboxError, 'an env name with =')
  await rejects(sbx.commands.run('true', { cwd: 'relative/../../..' + '/x'.repeat(3000) }), SandboxError, 'a cwd of 6 kB')
  eq(await sbx.commands.kill(2 ** 31), false, 'kill of pid 2^31')
  await rejects(sbx.commands.sendStdin(999_999, 'x'), SandboxError, 'sendStdin to an unknown pid')
  eq((await sbx.commands.run('echo still')).stdout, 'still\n', 'the sandbox still serves')
})

await done()
