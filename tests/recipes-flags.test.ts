// The CLI's flags are the recipes' options: every option of recipes/options.ts EmbodiedOptions and ResearchOptions
// is a flag of `wmrl train` / `wmrl research` with the schema's default in its help, and nothing in bin/ imports the
// service or the benchmarks (the verbs are adapters over recipes/).
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TObject, TSchema } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { EmbodiedOptions, ResearchOptions } from '../recipes/options.js';

const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 60_000 });
const kebab = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

function expectFlags(verb: string, schema: TObject): void {
  const help = wmrl(verb, '--help').stdout.replace(/\s+/g, ' ');
  for (const [key, s] of Object.entries(schema.properties) as Array<[string, TSchema]>) {
    const flag = s.default === true ? `--no-${kebab(key)}` : `--${kebab(key)}`;
    expect(help, `${verb} ${flag}`).toContain(`${flag} `);
    if (s.default !== undefined && typeof s.default !== 'boolean') expect(help, `${verb} ${flag} default`).toContain(`default: ${JSON.stringify(s.default)})`);
  }
}

describe('recipe flags', () => {
  it('wmrl train has a flag for every option of the embodied recipe, its default from the schema', () => expectFlags('train', EmbodiedOptions));
  it('wmrl research has a flag for every option of the AutoResearch recipe, its default from the schema', () => expectFlags('research', ResearchOptions));

  it('no file under bin/ but serve imports server/; none imports bench/', () => {
    const files = (d: string): string[] => readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(d, e.name)) : e.name.endsWith('.ts') ? [join(d, e.name)] : []));
    const imports = (f: string) => [...readFileSync(f, 'utf8').matchAll(/from '([^']+)'/g)].map((m) => m[1]!);
    for (const f of [...files('bin'), ...files('recipes'), ...files('server')]) {
      expect(imports(f).filter((i) => /(^|\/)bench\//.test(i)), f).toEqual([]);
      if (f.startsWith('bin') && f !== join('bin', 'commands', 'serve.ts')) expect(imports(f).filter((i) => /(^|\/)server\//.test(i)), f).toEqual([]);
    }
  });
});
