/**
 * The import graph of the production sources (controller/, cli/, runtime/; not tests): no cycle
 * anywhere, and the layer rules that a per-file lint pattern cannot say simply. eslint's
 * `no-restricted-imports` (eslint.config.js) holds the package edges file by file; this holds
 * what needs the whole graph.
 *
 * Type-only imports count as edges: a type loop is still two modules that cannot be read, moved
 * or split one without the other, and `import type` today becomes a value import tomorrow.
 * Re-exports (`export … from`) are edges too.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');
const PACKAGES = ['controller', 'cli', 'runtime'];

/** Production .ts files under `dir`, repo-relative with `/` separators. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) out.push(...sources(rel));
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts'))
      out.push(rel);
  }
  return out;
}

/** The repo-relative .ts file a relative specifier names, or undefined for a package or a non-.ts file. */
function target(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const abs = resolve(ROOT, dirname(from), spec.replace(/\.js$/, '.ts'));
  return relative(ROOT, abs).split(sep).join('/');
}

/** Every production file → the production files it imports (values, types and re-exports alike). */
function importGraph(files: readonly string[] = PACKAGES.flatMap(sources)): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const info = ts.preProcessFile(readFileSync(join(ROOT, f), 'utf8'), true, false);
    const to = info.importedFiles
      .map((i) => target(f, i.fileName))
      .filter((t): t is string => t !== undefined && known.has(t));
    graph.set(f, [...new Set(to)].sort());
  }
  return graph;
}

/** The cycles of the graph: one shortest cycle through each strongly connected component (Tarjan). */
function cyclesOf(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const c: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      c.push(w);
    } while (w !== v);
    if (c.length > 1 || (graph.get(v) ?? []).includes(v)) components.push(c);
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return components.map((c) => shortestCycle(graph, new Set(c)));
}

/** A shortest cycle inside one component, from its first file in sort order (a breadth-first walk). */
function shortestCycle(graph: ReadonlyMap<string, readonly string[]>, inside: ReadonlySet<string>): string[] {
  const start = [...inside].sort()[0]!;
  const from = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(from.get(path[0]!)!);
        return [...path, start];
      }
      if (!from.has(w)) {
        from.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

/**
 * The one loop left: `spec/schema.ts` builds the Backend schema from the registry's descriptors,
 * and the port (`backends/types.ts`), the settings and the adapters name the spec types derived
 * from it back (`import type`); the descriptors reach their adapters only by `import()`. Nothing
 * of it loads at run time (the load-time test below holds that, with no exception); it goes when
 * the spec types no longer come from the schema module. Until then it is allowed only as it is:
 * every file of it in `controller/backends/` or `controller/spec/schema.ts`, and `spec/schema.ts`
 * in it; any other loop fails.
 */
function isKnownLoop(cycle: readonly string[], graph: ReadonlyMap<string, readonly string[]>): boolean {
  const members = componentOf(cycle[0]!, graph);
  return (
    members.has('controller/spec/schema.ts') &&
    [...members].every((f) => f === 'controller/spec/schema.ts' || f.startsWith('controller/backends/'))
  );
}

/** The strongly connected component of `file`: the files it reaches that reach it back. */
function componentOf(file: string, graph: ReadonlyMap<string, readonly string[]>): Set<string> {
  const reach = (from: string, edges: (v: string) => readonly string[]) => {
    const seen = new Set([from]);
    const todo = [from];
    while (todo.length)
      for (const w of edges(todo.pop()!)) if (!seen.has(w) && (seen.add(w), true)) todo.push(w);
    return seen;
  };
  const forward = reach(file, (v) => graph.get(v) ?? []);
  const back = reach(file, (v) => [...graph].filter(([, to]) => to.includes(v)).map(([f]) => f));
  return new Set([...forward].filter((f) => back.has(f)));
}

/**
 * The layer rules over the whole graph: each entry is a file pattern that may not import another.
 * The per-file lint rules (eslint.config.js) say the same for single imports; here they also
 * hold for files the lint config leaves out, and a failure names both ends.
 */
const FORBIDDEN: { from: RegExp; to: RegExp; why: string }[] = [
  {
    from: /^runtime\//,
    to: /^(controller|cli)\//,
    why: 'the worker side never depends on the control plane or the CLI',
  },
  { from: /^controller\//, to: /^cli\//, why: 'the controller never depends on the CLI' },
  {
    from: /^cli\//,
    to: /^controller\/(?!index\.ts$)/,
    why: 'the CLI sees the controller only through its barrel',
  },
  {
    from: /^controller\/status\//,
    to: /^controller\/(reconcile|loop|backends)\//,
    why: 'status/ declares what the planners and the loop write: it sits below them',
  },
  {
    from: /^controller\/git\//,
    to: /^controller\/(status|reconcile|loop|backends)\//,
    why: 'git/ is plumbing: the layers above use it, not the other way',
  },
  {
    from: /^controller\/transport\//,
    to: /^controller\/(status|reconcile|loop|backends|spec)\//,
    why: 'transport/ is plumbing the adapters (and the port) use: it knows nothing of them',
  },
  {
    from: /^controller\/backends\/types\.ts$/,
    to: /^controller\/backends\/[^/]+\//,
    why: 'the port names no adapter folder: what it needs lives below it (transport/, runtime/)',
  },
  {
    from: /^controller\/backends\/registry\.ts$/,
    to: /^controller\/reconcile\//,
    why: 'the registry lists adapters; the solver reads it, not the other way',
  },
  {
    from: /^controller\/spec\//,
    to: /^controller\/backends\/(?!registry\.ts$|descriptors\.ts$)[^/]+\/(?!index\.ts$|settings\.ts$)/,
    why: 'validating YAML needs only the adapters’ descriptors and settings schemas, never an adapter',
  },
];

/** Every import that breaks a rule of FORBIDDEN, as `from → to (why)`. */
function layerBreaks(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const out: string[] = [];
  for (const [from, tos] of graph)
    for (const to of tos)
      for (const r of FORBIDDEN)
        if (r.from.test(from) && r.to.test(to)) out.push(`${from} → ${to} (${r.why})`);
  return out;
}

/**
 * Every production file → what loading it loads: the production files and packages of its value
 * imports and re-exports. Not `import type` / `export type` (erased), nor `import()` (loaded when
 * it runs). Under `verbatimModuleSyntax`, `import { type A } from 'm'` still loads `m`: an edge.
 */
function loadGraph(files: readonly string[] = PACKAGES.flatMap(sources)): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const file = ts.createSourceFile(f, readFileSync(join(ROOT, f), 'utf8'), ts.ScriptTarget.Latest);
    const specs = file.statements.flatMap((s) =>
      (ts.isImportDeclaration(s) && !s.importClause?.isTypeOnly) ||
      (ts.isExportDeclaration(s) && !s.isTypeOnly && s.moduleSpecifier)
        ? [(s.moduleSpecifier as ts.StringLiteral).text]
        : [],
    );
    // A package is named as imported (`ssh2`); a relative import, by the production file it names.
    const to = specs.flatMap((s) => {
      const t = target(f, s);
      return t === undefined ? [s] : known.has(t) ? [t] : [];
    });
    graph.set(f, [...new Set(to)].sort());
  }
  return graph;
}

/**
 * What validating YAML (`adv validate`, the loader, the editor schema: everything in
 * `controller/spec/`) must not load. A descriptor's `create` loads its adapter with `import()`;
 * the schema, rules and traits come from its `index.ts` and `settings.ts` alone.
 */
const NOT_FOR_VALIDATION: { what: RegExp; why: string }[] = [
  {
    what: /^controller\/backends\/[^/]+\/adapter\.ts$/,
    why: 'an adapter: its descriptor loads it in `create`',
  },
  { what: /^controller\/(transport|backends\/remote)\//, why: 'a transport to a machine' },
  {
    what: /^controller\/backends\/(vastai\/client|gcp-tpu\/gcloud|volcano\/kubectl|agent\/(hub|api))\.ts$/,
    why: "a backend's client",
  },
  { what: /^ssh2$/, why: 'the SSH client package' },
];

/** Each thing of NOT_FOR_VALIDATION that `controller/spec/` loads, as the chain that loads it. */
function validationLoads(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const from = new Map<string, string | undefined>();
  const queue = [...graph.keys()].filter((f) => f.startsWith('controller/spec/')).sort();
  for (const f of queue) from.set(f, undefined);
  const out: string[] = [];
  while (queue.length) {
    const v = queue.shift()!;
    const rule = NOT_FOR_VALIDATION.find((r) => r.what.test(v));
    if (rule) {
      const chain = [v];
      for (let p = from.get(v); p; p = from.get(p)) chain.unshift(p);
      out.push(`${chain.join(' → ')} (${rule.why})`);
      continue;
    }
    for (const w of graph.get(v) ?? [])
      if (!from.has(w)) {
        from.set(w, v);
        queue.push(w);
      }
  }
  return out;
}

describe('the import graph of controller/, cli/ and runtime/', () => {
  const graph = importGraph();
  const loads = loadGraph();

  it('sees the production files and their imports', () => {
    // A walk that found nothing would pass every check below.
    expect(graph.size).toBeGreaterThan(200);
    expect(graph.get('cli/adv.ts')).toContain('cli/program.ts');
    expect(graph.get('controller/backends/local/adapter.ts')).toContain('runtime/local-jobs.ts');
  });

  it('has no import cycle (type-only imports included) but the one being taken apart', () => {
    const all = cyclesOf(graph);
    const cycles = all.filter((c) => !isKnownLoop(c, graph)).map((c) => c.join(' → '));
    expect(cycles, `import cycles:\n${cycles.join('\n')}`).toEqual([]);
    // When the Backend schema no longer reaches the adapters, this fails: drop KNOWN_LOOP then.
    expect(
      all.some((c) => isKnownLoop(c, graph)),
      'the spec/schema.ts ↔ backends/ loop is gone: remove KNOWN_LOOP',
    ).toBe(true);
  });

  it('has no load-time cycle at all: the known loop is made of type imports and `import()` only', () => {
    const cycles = cyclesOf(loads).map((c) => c.join(' → '));
    expect(cycles, `modules that load each other:\n${cycles.join('\n')}`).toEqual([]);
  });

  it('keeps every layer rule', () => {
    const breaks = layerBreaks(graph);
    expect(breaks, `imports the wrong way:\n${breaks.join('\n')}`).toEqual([]);
  });

  it('loads no adapter, transport or backend client when validating YAML (controller/spec/)', () => {
    // The walk sees the schema's way to the descriptors, and no load of an adapter by one.
    expect(loads.get('controller/spec/schema.ts')).toContain('controller/backends/registry.ts');
    expect(loads.get('controller/backends/registry.ts')).toContain('controller/backends/ssh/index.ts');
    expect(graph.get('controller/backends/ssh/index.ts')).toContain('controller/backends/ssh/adapter.ts');
    expect(loads.get('controller/backends/ssh/index.ts')).not.toContain('controller/backends/ssh/adapter.ts');
    const found = validationLoads(loads);
    expect(found, `validating YAML loads:\n${found.join('\n')}`).toEqual([]);
  });

  it('names the chain of a planted adapter load from controller/spec/', () => {
    const planted = new Map(loads);
    planted.set('controller/backends/ssh/index.ts', [
      ...(planted.get('controller/backends/ssh/index.ts') ?? []),
      'controller/backends/ssh/adapter.ts',
    ]);
    const found = validationLoads(planted);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(
      /^controller\/spec\/[^ ]+ → .*controller\/backends\/registry\.ts → controller\/backends\/ssh\/index\.ts → controller\/backends\/ssh\/adapter\.ts \(an adapter: its descriptor loads it in `create`\)$/,
    );
  });

  it('names a planted cycle and a planted wrong-way import', () => {
    const tiny = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts', 'd.ts']],
      ['d.ts', []],
    ]);
    expect(cyclesOf(tiny)).toEqual([['a.ts', 'b.ts', 'c.ts', 'a.ts']]);
    // status/types.ts importing the Run planner again: the loop this part took apart.
    const planted = new Map(graph);
    planted.set('controller/status/types.ts', [
      ...(graph.get('controller/status/types.ts') ?? []),
      'controller/reconcile/run-plan.ts',
    ]);
    const found = cyclesOf(planted)
      .filter((c) => !isKnownLoop(c, planted))
      .map((c) => c.join(' → '));
    expect(found.join('\n')).toContain('controller/status/types.ts → controller/reconcile/run-plan.ts');
    expect(layerBreaks(planted)).toContain(
      'controller/status/types.ts → controller/reconcile/run-plan.ts (status/ declares what the planners and the loop write: it sits below them)',
    );
  });
});
