// Files through the SDK: write and read as text, bytes, a Blob and a stream of several MiB; list
// with depth (sorted, absolute); exists; getInfo (mode, permissions, owner, symlinks); makeDir,
// rename, remove; the errors (missing files, bad paths); writeFiles; upload and download URLs;
// metadata; watchDir; and paths that try to leave the sandbox.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Sandbox, FileNotFoundError, NotFoundError, SandboxError, InvalidArgumentError, FilesystemEventType } from 'e2b'
import { start, done, test, assert, eq, match, rejects, waitFor } from './harness.mjs'

const PENDING = {
}

await start({ pending: PENDING })
const sbx = await Sandbox.create({ timeoutMs: 180_000 })
const sha = (b) => createHash('sha256').update(b).digest('hex')

await test('write and read text; a relative path is under the home', async () => {
  const w = await sbx.files.write('/tmp/f/a.txt', 'héllo, wörld\n')
  eq([w.name, w.type, w.path], ['a.txt', 'file', '/tmp/f/a.txt'], 'WriteInfo')
  eq(await sbx.files.read('/tmp/f/a.txt'), 'héllo, wörld\n', 'read')
  const rel = await sbx.files.write('rel/b.txt', 'relative')
  eq(rel.path, '/home/user/rel/b.txt', 'relative path')
  eq(await sbx.files.read('/home/user/rel/b.txt'), 'relative', 'read back by its absolute path')
  await sbx.files.write('/tmp/f/a.txt', 'shorter')
  eq(await sbx.files.read('/tmp/f/a.txt'), 'shorter', 'an overwrite truncates')
  await sbx.files.write('/tmp/f/empty', '')
  eq(await sbx.files.read('/tmp/f/empty'), '', 'an empty file')
})

await test('write and read bytes: every byte value', async () => {
  const all = new Uint8Array(1024).map((_, i) => i % 256)
  await sbx.files.write('/tmp/f/bytes.bin', all.buffer)
  const got = await sbx.files.read('/tmp/f/bytes.bin', { format: 'bytes' })
  assert(got instanceof Uint8Array, 'a Uint8Array')
  eq(sha(got), sha(all), 'sha256')
  eq((await sbx.commands.run('sha256sum /tmp/f/bytes.bin')).stdout.split(' ')[0], sha(all), 'as the sandbox sees it')
})

await test('write a Blob, read a Blob', async () => {
  await sbx.files.write('/tmp/f/blob.txt', new Blob(['blob ', 'parts']))
  const b = await sbx.files.read('/tmp/f/blob.txt', { format: 'blob' })
  assert(b instanceof Blob, 'a Blob')
  eq(await b.text(), 'blob parts', 'its text')
})

await test('a stream of 6 MiB up and down, byte for byte', async () => {
  const size = 6 << 20
  const chunk = 64 << 10
  const h = createHash('sha256')
  let sent = 0
  const up = new ReadableStream({
    pull(ctl) {
      if (sent >= size) return ctl.close()
      const c = new Uint8Array(chunk).map((_, i) => (sent + i) * 7 % 251)
      h.update(c)
      sent += chunk
      ctl.enqueue(c)
    },
  })
  const w = await sbx.files.write('/tmp/f/big.bin', up)
  eq(w.path, '/tmp/f/big.bin', 'path')
  const want = h.digest('hex')
  eq((await sbx.files.getInfo('/tmp/f/big.bin')).size, size, 'size')
  const down = await sbx.files.read('/tmp/f/big.bin', { format: 'stream' })
  const g = createHash('sha256')
  let n = 0
  for await (const c of down) {
    g.update(c)
    n += c.length
  }
  eq(n, size, 'bytes read')
  eq(g.digest('hex'), want, 'sha256')
}, { timeoutMs: 60_000 })

await test('writeFiles: several files in one call', async () => {
  const infos = await sbx.files.write([
    { path: '/tmp/multi/one.txt', data: 'one' },
    { path: '/tmp/multi/sub/two.txt', data: 'two' },
    { path: 'multi-home.txt', data: new Uint8Array([51]).buffer },
  ])
  eq(infos.map((i) => i.path), ['/tmp/multi/one.txt', '/tmp/multi/sub/two.txt', '/home/user/multi-home.txt'], 'paths')
  eq(await sbx.files.read('/tmp/multi/sub/two.txt'), 'two', 'the second')
  eq(await sbx.files.read('/home/user/multi-home.txt'), '3', 'the third')
  const again = await sbx.files.writeFiles([{ path: '/tmp/multi/three.txt', data: 'three' }])
  eq(again.map((i) => i.name), ['three.txt'], 'writeFiles()')
})

await test('list: depth 1, depth 3, sorted and absolute', async () => {
  await sbx.commands.run('mkdir -p /tmp/tree/b/c/d && touch /tmp/tree/z.txt /tmp/tree/a.txt /tmp/tree/b/x.txt /tmp/tree/b/c/y.txt /tmp/tree/b/c/d/deep.txt')
  const one = await sbx.files.list('/tmp/tree')
  eq(one.map((e) => [e.path, e.type]), [['/tmp/tree/a.txt', 'file'], ['/tmp/tree/b', 'dir'], ['/tmp/tree/z.txt', 'file']], 'depth 1')
  eq(one.map((e) => e.name), ['a.txt', 'b', 'z.txt'], 'names')
  const three = await sbx.files.list('/tmp/tree', { depth: 3 })
  eq(three.map((e) => e.path), [
    '/tmp/tree/a.txt', '/tmp/tree/b', '/tmp/tree/b/c', '/tmp/tree/b/c/d', '/tmp/tree/b/c/y.txt', '/tmp/tree/b/x.txt', '/tmp/tree/z.txt',
  ], 'depth 3: sorted by path, deep.txt (depth 4) left out')
  eq(three.find((e) => e.name === 'y.txt')?.path, '/tmp/tree/b/c/y.txt', 'a name is its last element')
  eq((await sbx.files.list('/tmp/tree/b/c/d')).map((e) => e.name), ['deep.txt'], 'a deeper list')
  const home = await sbx.files.list('.')
  assert(home.every((e) => e.path.startsWith('/home/user/')), `relative list under home: ${home.map((e) => e.path)}`)
})

await test('exists: a file, a directory, a missing path', async () => {
  eq(await sbx.files.exists('/tmp/f/a.txt'), true, 'a file')
  eq(await sbx.files.exists('/tmp/f'), true, 'a directory')
  eq(await sbx.files.exists('/tmp/f/nope'), false, 'a missing file')
  eq(await sbx.files.exists('/tmp/nope/nope'), false, 'under a missing directory')
})

await test('getInfo: type, size, mode, permissions, owner, group, modifiedTime', async () => {
  await sbx.files.write('/tmp/f/info.txt', '12345')
  const f = await sbx.files.getInfo('/tmp/f/info.txt')
  eq([f.name, f.type, f.path, f.size], ['info.txt', 'file', '/tmp/f/info.txt', 5], 'name, type, path, size')
  eq(f.mode, 0o644, 'mode')
  eq(f.permissions, '-rw-r--r--', 'permissions')
  eq([f.owner, f.group], ['user', 'user'], 'owner, group')
  assert(f.modifiedTime instanceof Date && Math.abs(f.modifiedTime - Date.now()) < 60_000, `modifiedTime ${f.modifiedTime}`)
  const d = await sbx.files.getInfo('/tmp/f')
  eq([d.type, d.mode, d.permissions], ['dir', 0o755, 'drwxr-xr-x'], 'a directory')
  assert(d.size > 0, `a directory's size: ${d.size}`)
  await sbx.commands.run('chmod 0600 /tmp/f/info.txt')
  eq((await sbx.files.getInfo('/tmp/f/info.txt')).permissions, '-rw-------', 'after chmod 0600')
  const r = await sbx.files.getInfo('/root', { user: 'root' })
  eq(r.owner, 'root', "/root's owner")
})

// envd reports a link with its target's type (shared/pkg/filesystem's GetEntryInfo follows it)
await test('getInfo of a symlink: its target\'s type and absolute target', async () => {
  await sbx.commands.run('ln -sfn ../f/info.txt /tmp/f/link && ln -sfn /tmp/f /tmp/dirlink')
  const l = await sbx.files.getInfo('/tmp/f/link')
  eq(l.type, 'file', 'type: the target\'s')
  eq(l.symlinkTarget, '/tmp/f/info.txt', 'symlinkTarget, absolute')
  const d = await sbx.files.getInfo('/tmp/dirlink')
  eq([d.type, d.symlinkTarget], ['dir', '/tmp/f'], 'a link to a directory')
})

await test('makeDir: true when made (with parents), false when it exists', async () => {
  eq(await sbx.files.makeDir('/tmp/mk/a/b/c'), true, 'made')
  eq(await sbx.files.makeDir('/tmp/mk/a/b/c'), false, 'again')
  eq((await sbx.files.getInfo('/tmp/mk/a')).type, 'dir', 'a parent')
})

await test('rename: the new entry; the old path gone', async () => {
  await sbx.files.write('/tmp/mv/old.txt', 'moving')
  const e = await sbx.files.rename('/tmp/mv/old.txt', '/tmp/mv/new.txt')
  eq([e.name, e.path, e.type], ['new.txt', '/tmp/mv/new.txt', 'file'], 'the entry')
  eq(await sbx.files.exists('/tmp/mv/old.txt'), false, 'the old path')
  eq(await sbx.files.read('/tmp/mv/new.txt'), 'moving', 'the content')
  await sbx.files.makeDir('/tmp/mv/dir')
  await sbx.files.write('/tmp/mv/dir/in.txt', 'in')
  await sbx.files.rename('/tmp/mv/dir', '/tmp/mv/dir2')
  eq(await sbx.files.read('/tmp/mv/dir2/in.txt'), 'in', 'a directory with its content')
  await rejects(sbx.files.rename('/tmp/mv/none', '/tmp/mv/x'), NotFoundError, 'rename of a missing path')
})

await test('remove: a file, a directory tree', async () => {
  await sbx.files.write('/tmp/rm/a/b/c.txt', 'c')
  await sbx.files.write('/tmp/rm/f.txt', 'f')
  await sbx.files.remove('/tmp/rm/f.txt')
  eq(await sbx.files.exists('/tmp/rm/f.txt'), false, 'the file')
  await sbx.files.remove('/tmp/rm')
  eq(await sbx.files.exists('/tmp/rm'), false, 'the tree')
})

await test('missing files: FileNotFoundError from read, getInfo, list', async () => {
  await rejects(sbx.files.read('/tmp/none.txt'), FileNotFoundError, 'read')
  await rejects(sbx.files.read('/tmp/none.txt', { format: 'bytes' }), FileNotFoundError, 'read bytes')
  await rejects(sbx.files.getInfo('/tmp/none.txt'), FileNotFoundError, 'getInfo')
  await rejects(sbx.files.list('/tmp/none-dir'), NotFoundError, 'list')
})

await test('the user: root writes where the user cannot', async () => {
  const w = await sbx.files.write('/root/r.txt', 'root only', { user: 'root' })
  eq(w.path, '/root/r.txt', 'as root')
  eq((await sbx.files.getInfo('/root/r.txt', { user: 'root' })).owner, 'root', 'owned by root')
  const rel = await sbx.files.write('rel-root.txt', 'r', { user: 'root' })
  eq(rel.path, '/root/rel-root.txt', "a relative path as root is under /root")
  await rejects(sbx.files.write('/root/u.txt', 'x'), SandboxError, 'the user writing in /root')
  await rejects(sbx.files.read('/root/r.txt'), SandboxError, 'the user reading in /root')
})

await test('bad paths: a directory read, a file listed, a file as a parent, NUL, too long', async () => {
  await rejects(sbx.files.read('/tmp/f'), InvalidArgumentError, 'read of a directory')
  await rejects(sbx.files.list('/tmp/f/a.txt'), InvalidArgumentError, 'list of a file')
  await rejects(sbx.files.write('/tmp/f/a.txt/under', 'x'), InvalidArgumentError, 'a file as a parent')
  await rejects(sbx.files.makeDir('/tmp/f/a.txt/d'), InvalidArgumentError, 'makeDir under a file')
  await rejects(sbx.files.read('/tmp/a\0b'), InvalidArgumentError, 'a NUL in the path')
  await rejects(sbx.files.write('/tmp/a\0b', 'x'), InvalidArgumentError, 'a NUL in the write path')
  await rejects(sbx.files.getInfo('/tmp/' + 'n'.repeat(300)), InvalidArgumentError, 'a name of 300 bytes')
  await rejects(sbx.files.read('/tmp' + '/d'.repeat(3000)), SandboxError, 'a path of 6 kB')
  await rejects(sbx.files.write('', 'x'), InvalidArgumentError, 'an empty path')
  eq(await sbx.files.read('/tmp/f/a.txt'), 'shorter', 'the files are untouched')
})

await test('paths that try to leave the sandbox stay inside it', async () => {
  const host = readFileSync('/etc/hostname', 'utf8')
  const inside = await sbx.files.read('/../../../../etc/hostname')
  eq(inside, (await sbx.commands.run('cat /etc/hostname')).stdout, '/../../../../etc/hostname is the sandbox\'s')
  assert(inside !== host || host === '', "the host's /etc/hostname")
  await sbx.commands.run('ln -sfn / /tmp/rootlink && ln -sfn ../../../../../../.. /tmp/uplink')
  eq(await sbx.files.read('/tmp/rootlink/etc/hostname'), inside, 'through a link to /')
  eq(await sbx.files.read('/tmp/uplink/etc/hostname'), inside, 'through a link of ..s')
  const w = await sbx.files.write('/tmp/uplink/tmp/escaped.txt', 'in')
  eq(w.path, '/tmp/uplink/tmp/escaped.txt', 'a write through the link')
  eq((await sbx.commands.run('cat /tmp/escaped.txt')).stdout, 'in', 'landed in the sandbox\'s /tmp')
  await rejects(sbx.files.write('/proc/self/mem', 'x'), SandboxError, 'a write to /proc/self/mem')
})

await test('write with metadata: it comes back in getInfo and list; an overwrite clears it', async () => {
  const w = await sbx.files.write('/tmp/meta.txt', 'm', { metadata: { owner: 'e2e', 'k-2': 'v 2' } })
  eq(w.metadata, { owner: 'e2e', 'k-2': 'v 2' }, 'in the write reply')
  eq((await sbx.files.getInfo('/tmp/meta.txt')).metadata, { owner: 'e2e', 'k-2': 'v 2' }, 'getInfo')
  eq((await sbx.files.list('/tmp')).find((e) => e.name === 'meta.txt')?.metadata, { owner: 'e2e', 'k-2': 'v 2' }, 'list')
  await sbx.files.write('/tmp/meta.txt', 'again')
  const m = (await sbx.files.getInfo('/tmp/meta.txt')).metadata
  assert(!m || Object.keys(m).length === 0, `after an overwrite: ${JSON.stringify(m)}`)
})

await test('gzip: a gzip upload and a gzip download', async () => {
  const text = 'gzip me '.repeat(10_000)
  await sbx.files.write('/tmp/gz.txt', text, { gzip: true })
  eq((await sbx.commands.run('wc -c < /tmp/gz.txt')).stdout, `${text.length}\n`, 'stored plain')
  eq(await sbx.files.read('/tmp/gz.txt', { gzip: true }), text, 'read with gzip')
})

await test('uploadUrl and downloadUrl: a plain fetch moves the file', async () => {
  const up = await sbx.uploadUrl('/tmp/url/up.txt')
  const form = new FormData()
  form.append('file', new Blob(['through a url']), 'up.txt')
  const r = await fetch(up, { method: 'POST', body: form })
  eq(r.status, 200, `upload status (${await r.text()})`)
  eq(await sbx.files.read('/tmp/url/up.txt'), 'through a url', 'uploaded')
  const down = await sbx.downloadUrl('/tmp/url/up.txt', { useSignatureExpiration: 60_000 })
  const d = await fetch(down)
  eq([d.status, await d.text()], [200, 'through a url'], 'downloaded')
})

await test('signed URLs: an expired or forged signature gets 401', async () => {
  await sbx.files.write('/tmp/url/s.txt', 's')
  const good = new URL(await sbx.downloadUrl('/tmp/url/s.txt'))
  eq((await fetch(good)).status, 200, 'the signed URL itself')
  const forged = new URL(good)
  forged.searchParams.set('signature', 'v1_' + 'A'.repeat(43))
  eq((await fetch(forged)).status, 401, 'forged')
  const other = new URL(good)
  other.searchParams.set('path', '/etc/passwd')
  eq((await fetch(other)).status, 401, 'another path under the same signature')
  const old = new URL(await sbx.downloadUrl('/tmp/url/s.txt', { useSignatureExpiration: 1 }))
  await new Promise((r) => setTimeout(r, 2100))
  eq((await fetch(old)).status, 401, 'expired')
})

await test('watchDir: create, write, rename and remove events, recursive', async () => {
  await sbx.files.makeDir('/tmp/watched/sub')
  const events = []
  const w = await sbx.files.watchDir('/tmp/watched', (e) => events.push(e), { recursive: true })
  await sbx.files.write('/tmp/watched/new.txt', 'x')
  await sbx.files.write('/tmp/watched/sub/nested.txt', 'y')
  await sbx.files.rename('/tmp/watched/new.txt', '/tmp/watched/renamed.txt')
  await sbx.files.remove('/tmp/watched/renamed.txt')
  const has = (name, type) => events.some((e) => e.name === name && e.type === type)
  const all = await waitFor(() =>
    has('new.txt', FilesystemEventType.CREATE) && has('new.txt', FilesystemEventType.WRITE) &&
    has('sub/nested.txt', FilesystemEventType.CREATE) && has('new.txt', FilesystemEventType.RENAME) &&
    has('renamed.txt', FilesystemEventType.REMOVE), 10_000)
  await w.stop()
  assert(all, `events: ${JSON.stringify(events)}`)
})

await test('watchDir with includeEntry: created, written and chmodded files come with their entry', async () => {
  await sbx.files.makeDir('/tmp/watched-e')
  const events = []
  const w = await sbx.files.watchDir('/tmp/watched-e', (e) => events.push(e), { includeEntry: true })
  await sbx.commands.run('cd /tmp/watched-e && printf hello > f && chmod 640 f && sleep 0.3 && rm f')
  const chmod = await waitFor(() => events.find((e) => e.name === 'f' && e.type === FilesystemEventType.CHMOD), 10_000)
  const removed = await waitFor(() => events.find((e) => e.name === 'f' && e.type === FilesystemEventType.REMOVE), 10_000)
  await w.stop()
  assert(chmod && chmod.entry, `a CHMOD with an entry: ${JSON.stringify(events)}`)
  eq([chmod.entry.name, chmod.entry.type, chmod.entry.path, chmod.entry.size, chmod.entry.permissions, chmod.entry.owner],
    ['f', 'file', '/tmp/watched-e/f', 5, '-rw-r-----', 'user'], 'its entry, as Stat gives it')
  assert(chmod.entry.modifiedTime instanceof Date, 'modifiedTime is a Date')
  assert(removed && removed.entry === undefined, `a REMOVE has none: ${JSON.stringify(removed)}`)
})

await test('watchDir without includeEntry: no entries', async () => {
  const events = []
  const w = await sbx.files.watchDir('/tmp/watched-e', (e) => events.push(e))
  await sbx.files.write('/tmp/watched-e/g', 'x')
  const got = await waitFor(() => events.some((e) => e.name === 'g'), 10_000)
  await w.stop()
  assert(got && events.every((e) => e.entry === undefined), `events: ${JSON.stringify(events)}`)
})

await test('watchDir: a missing directory is NotFoundError', async () => {
  await rejects(sbx.files.watchDir('/tmp/no-such-watch', () => {}), NotFoundError, 'watchDir')
})

await done()
