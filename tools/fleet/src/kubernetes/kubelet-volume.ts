import { existsSync, mkdirSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

let sequence = 0;

/**
 * Writes `files` into `dir` the way kubelet updates a ConfigMap volume (its AtomicWriter): the
 * payload goes into a new hidden timestamped directory, a `..data_tmp` symlink to it is renamed
 * over `..data` (the atomic switch), each visible file is a symlink `name -> ..data/name` (made
 * once), and the previous timestamped directory is removed. A reader sees the old or the new
 * set of files, never a mix, and `edge.yaml` itself is never written in place.
 */
export function writeLikeKubelet(dir: string, files: Record<string, string>): void {
  mkdirSync(dir, { recursive: true });
  const data = path.join(dir, '..data');
  const previous = existsSync(data) ? readlinkSync(data) : undefined;
  const stamp = `..${new Date().toISOString().replace(/[-:]/g, '_').replace('T', '_').replace('Z', '')}${String(++sequence).padStart(6, '0')}`;
  mkdirSync(path.join(dir, stamp));
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, stamp, name), text);
  symlinkSync(stamp, path.join(dir, '..data_tmp'));
  renameSync(path.join(dir, '..data_tmp'), data);
  for (const name of Object.keys(files)) {
    if (!existsSync(path.join(dir, name))) symlinkSync(path.posix.join('..data', name), path.join(dir, name));
  }
  if (previous) rmSync(path.join(dir, previous), { recursive: true, force: true });
}
