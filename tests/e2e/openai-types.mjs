// The Realtime server events as the `openai` npm package types them, read at test time from
// node_modules/openai/resources/realtime/realtime.d.ts (the version package-lock.json pins, a dependency of
// @openai/agents-realtime), so the e2e tests can check every server event voice-edge sends against the
// official shapes instead of against our own reading of them.
//
// What it extracts, without a TypeScript compiler: every interface, namespace and type alias of the file;
// the union `RealtimeServerEvent`; for each member interface its `type: '…'` literal. A value is checked
// against a declared type recursively: required (non-`?`) properties present, string literals equal,
// `string`/`number`/`boolean` of the right kind, `null` where allowed, arrays element by element, references
// to this file's interfaces and unions (a union passes when one member does). Types from other modules
// (`Shared.…`, `ResponsesAPI.…`), `unknown` and index signatures accept anything; extra properties are not
// flagged (the types do not forbid them). `null` in an optional property typed without `| null` (e.g.
// `status_details?: RealtimeResponseStatus`) is a *note*, logged but not failed: the API and the SDK's own
// session.update send null for such fields, and the generated types do not say so.
//
//   import { serverEventShapes } from './openai-types.mjs';
//   const shapes = serverEventShapes();            // parsed once per process
//   shapes.types                                   // Map 'response.done' → {name, required, optional}
//   shapes.check(event)                            // {known, name, problems: ['response.output_index: missing', …]}
//   assertServerEventShapes(assert, events, label) // every event known and well formed, else one failure listing all
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const REALTIME_DTS = path.join(here, 'node_modules', 'openai', 'resources', 'realtime', 'realtime.d.ts');
/** The Live API's types: the union there is `ServerEvent` (resources/live/live.d.ts). */
export const LIVE_DTS = path.join(here, 'node_modules', 'openai', 'resources', 'live', 'live.d.ts');

// --- parsing -------------------------------------------------------------------------------------------

function stripComments(src) {
  return src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}

/** Index of the bracket closing the one at `open` (any of {([<), skipping string literals. */
function matching(text, open) {
  const pairs = { '{': '}', '(': ')', '[': ']', '<': '>' };
  const stack = [];
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === "'" || c === '"' || c === '`') {
      i = skipString(text, i);
      continue;
    }
    if (c === '=' && text[i + 1] === '>') {
      i++;
      continue;
    }
    if (pairs[c]) stack.push(pairs[c]);
    else if (c === stack[stack.length - 1]) {
      stack.pop();
      if (!stack.length) return i;
    }
  }
  throw new Error(`unbalanced bracket at ${open}`);
}

function skipString(text, i) {
  const q = text[i];
  for (let j = i + 1; j < text.length; j++) {
    if (text[j] === '\\') j++;
    else if (text[j] === q) return j;
  }
  return text.length;
}

/** Split `text` at top-level occurrences of `sep` (a single character). */
function splitTop(text, sep) {
  const out = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "'" || c === '"' || c === '`') {
      i = skipString(text, i);
      continue;
    }
    if (c === '=' && text[i + 1] === '>') {
      i++;
      continue;
    }
    if ('{([<'.includes(c)) depth++;
    else if ('})]>'.includes(c)) depth--;
    else if (c === sep && depth === 0) {
      out.push(text.slice(start, i));
      start = i + 1;
    }
  }
  out.push(text.slice(start));
  return out.map((s) => s.trim()).filter(Boolean);
}

/** A type expression → node {kind: any|prim|null|lit|array|object|ref|union, …}. */
function parseType(src, scope) {
  let s = src.trim();
  while (s.startsWith('(') && matching(s, 0) === s.length - 1) s = s.slice(1, -1).trim();
  const parts = splitTop(s, '|');
  if (parts.length > 1) return { kind: 'union', members: parts.map((p) => parseType(p, scope)) };
  if (/^'[^']*'$|^"[^"]*"$/.test(s)) return { kind: 'lit', value: s.slice(1, -1) };
  if (/^-?\d+(\.\d+)?$/.test(s)) return { kind: 'lit', value: Number(s) };
  if (s === 'null') return { kind: 'null' };
  if (s === 'string' || s === 'number' || s === 'boolean') return { kind: 'prim', name: s };
  if (s === 'true' || s === 'false') return { kind: 'lit', value: s === 'true' };
  if (s.endsWith('[]')) return { kind: 'array', of: parseType(s.slice(0, -2), scope) };
  let m = s.match(/^(?:Array|ReadonlyArray)<([\s\S]*)>$/);
  if (m) return { kind: 'array', of: parseType(m[1], scope) };
  if (s.startsWith('{') && matching(s, 0) === s.length - 1) return { kind: 'object', ...parseMembers(s.slice(1, -1), scope) };
  m = s.match(/^([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)$/);
  if (m) return { kind: 'ref', name: m[1], scope };
  return { kind: 'any', src: s }; // generics, intersections, functions, unknown, any, …
}

/** Interface / object-literal members → {props: Map name → {optional, type}, open}. */
function parseMembers(body, scope) {
  const props = new Map();
  let open = false;
  for (const member of splitTop(body, ';').flatMap((m) => splitTop(m, ','))) {
    if (member.startsWith('[')) {
      open = true; // index signature
      continue;
    }
    const m = member.match(/^(?:readonly\s+)?(?:'([^']+)'|"([^"]+)"|([A-Za-z_$][\w$]*))(\?)?\s*:\s*([\s\S]+)$/);
    if (!m) continue; // method signatures and the like
    props.set(m[1] ?? m[2] ?? m[3], { optional: !!m[4], type: parseType(m[5], scope) });
  }
  return { props, open };
}

/** Every interface / type alias of `text`, keyed by its dotted path (namespaces included). */
function parseDeclarations(text, prefix = '', decls = new Map()) {
  const re = /(?:export\s+)?(?:declare\s+)?(namespace|interface|type|class)\s+([A-Za-z_$][\w$]*)(?:<[^>{=]*>)?(?:\s+(?:extends|implements)\s+([^{=]+?))?\s*(\{|=)/g;
  let m;
  while ((m = re.exec(text))) {
    const [, kind, name, ext, opener] = m;
    const full = prefix ? `${prefix}.${name}` : name;
    if (opener === '{') {
      const open = m.index + m[0].length - 1;
      const close = matching(text, open);
      const body = text.slice(open + 1, close);
      if (kind === 'namespace') parseDeclarations(body, full, decls);
      else if (kind === 'interface') {
        decls.set(full, {
          kind: 'interface',
          name: full,
          ...parseMembers(body, prefix),
          extends: ext ? splitTop(ext, ',').map((e) => ({ kind: 'ref', name: e.trim(), scope: prefix })) : [],
        });
      }
      re.lastIndex = close + 1;
    } else if (kind === 'type') {
      const start = m.index + m[0].length;
      let end = start;
      let depth = 0;
      for (; end < text.length; end++) {
        const c = text[end];
        if (c === "'" || c === '"' || c === '`') end = skipString(text, end);
        else if (c === '=' && text[end + 1] === '>') end++;
        else if ('{([<'.includes(c)) depth++;
        else if ('})]>'.includes(c)) depth--;
        else if (c === ';' && depth === 0) break;
      }
      decls.set(full, { kind: 'alias', name: full, type: parseType(text.slice(start, end), prefix) });
      re.lastIndex = end + 1;
    }
  }
  return decls;
}

// --- checking ------------------------------------------------------------------------------------------

class Shapes {
  constructor(decls, file, version, unionName) {
    this.decls = decls;
    this.file = file;
    this.version = version;
    this.unionName = unionName;
    /** 'response.done' → {name, required[], optional[]} for every member of the union. */
    this.types = new Map();
    const union = decls.get(unionName);
    if (!union || union.kind !== 'alias' || union.type.kind !== 'union') throw new Error(`${file}: no union type ${unionName}`);
    for (const member of union.type.members) {
      const d = this.resolve(member);
      if (!d || d.kind !== 'interface') throw new Error(`${file}: ${unionName} member ${member.name} is not an interface here`);
      const props = this.props(d);
      const t = props.get('type')?.type;
      const lits = t?.kind === 'lit' ? [t.value] : t?.kind === 'union' ? t.members.filter((x) => x.kind === 'lit').map((x) => x.value) : [];
      const required = [...props].filter(([, p]) => !p.optional).map(([k]) => k);
      const optional = [...props].filter(([, p]) => p.optional).map(([k]) => k);
      for (const lit of lits) this.types.set(lit, { name: d.name, decl: d, required, optional });
    }
  }

  /** The declaration a ref names, looked up from its namespace outwards; null for other modules' types. */
  resolve(ref) {
    if (ref.kind !== 'ref') return null;
    const name = ref.name.replace(/^(RealtimeAPI|LiveAPI)\./, '');
    const scope = ref.scope ? ref.scope.split('.') : [];
    for (let i = scope.length; i >= 0; i--) {
      const full = [...scope.slice(0, i), name].join('.');
      if (this.decls.has(full)) return this.decls.get(full);
    }
    return null;
  }

  /** An interface's properties, inherited ones (from this file) included. */
  props(d) {
    const out = new Map();
    for (const e of d.extends || []) {
      const base = this.resolve(e);
      if (base?.kind === 'interface') for (const [k, v] of this.props(base)) out.set(k, v);
    }
    for (const [k, v] of d.props) out.set(k, v);
    return out;
  }

  /** Problems of `value` against type node `t`, as 'path: what' strings. */
  problems(value, t, at, depth = 0) {
    if (depth > 12) return [];
    switch (t.kind) {
      case 'any':
        return [];
      case 'null':
        return value === null ? [] : [`${at}: ${show(value)} is not null`];
      case 'lit':
        return value === t.value ? [] : [`${at}: ${show(value)} is not ${show(t.value)}`];
      case 'prim':
        return typeof value === t.name ? [] : [`${at}: ${show(value)} is not a ${t.name}`];
      case 'array':
        if (!Array.isArray(value)) return [`${at}: ${show(value)} is not an array`];
        return value.flatMap((v, i) => this.problems(v, t.of, `${at}[${i}]`, depth + 1));
      case 'object':
        return this.objectProblems(value, t.props, at, depth);
      case 'ref': {
        const d = this.resolve(t);
        if (!d) return [];
        if (d.kind === 'alias') return this.problems(value, d.type, at, depth + 1);
        return this.objectProblems(value, this.props(d), at, depth, d.name);
      }
      case 'union': {
        const lits = t.members.filter((m) => m.kind === 'lit');
        if (lits.length === t.members.length) {
          return lits.some((l) => l.value === value) ? [] : [`${at}: ${show(value)} is not one of ${lits.map((l) => show(l.value)).join(' | ')}`];
        }
        let best = null;
        for (const m of t.members) {
          const p = this.problems(value, m, at, depth + 1);
          if (!p.some((x) => !isNote(x))) return p;
          // Prefer the member whose discriminating literals (type, role, object, …) the value matches.
          const rank = this.discriminates(value, m) ? 0 : 1;
          const n = p.filter((x) => !isNote(x)).length;
          if (!best || rank < best.rank || (rank === best.rank && n < best.n)) best = { rank, p, m, n };
        }
        return best.rank === 0 || t.members.length === 1
          ? best.p
          : [`${at}: ${show(value)} matches none of ${t.members.map((m) => m.name ?? m.kind).join(' | ')}`];
      }
      default:
        return [];
    }
  }

  /** Whether `value` has every literal-typed property of the object type `t` at its literal value. */
  discriminates(value, t) {
    if (!value || typeof value !== 'object') return false;
    const d = t.kind === 'ref' ? this.resolve(t) : null;
    const props = t.kind === 'object' ? t.props : d?.kind === 'interface' ? this.props(d) : null;
    if (!props) return false;
    // Literal-typed properties that are required, or optional and present.
    const lits = [...props].filter(([k, p]) => p.type.kind === 'lit' && (!p.optional || k in value));
    return lits.length > 0 && lits.every(([k, p]) => value[k] === p.type.value);
  }

  objectProblems(value, props, at, depth, name) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return [`${at}: ${show(value)} is not an object${name ? ` (${name})` : ''}`];
    const out = [];
    for (const [k, p] of props) {
      if (!(k in value) || value[k] === undefined) {
        if (!p.optional) out.push(`${at}.${k}: missing${name ? ` (required by ${name})` : ''}`);
        continue;
      }
      const inner = this.problems(value[k], p.type, `${at}.${k}`, depth + 1);
      if (value[k] === null && p.optional && inner.some((x) => !isNote(x))) {
        // `k?: T` without `| null`, sent as null: the types say "omit it", the API (and the SDK's own
        // session.update, e.g. noise_reduction) send null for many such fields. A note, not a problem.
        out.push(note(`${at}.${k}: null where the type is optional but not nullable${name ? ` (${name})` : ''}`));
        continue;
      }
      out.push(...inner);
    }
    return out;
  }

  /** {known, name, problems} for one server event. */
  check(event) {
    const entry = this.types.get(event?.type);
    if (!entry) return { known: false, name: null, problems: [`type ${show(event?.type)} is not in ${this.unionName}`] };
    const all = this.objectProblems(event, this.props(entry.decl), event.type, 0, entry.name);
    return {
      known: true,
      name: entry.name,
      problems: all.filter((x) => !isNote(x)),
      notes: all.filter(isNote).map((x) => x.slice(NOTE.length)),
    };
  }

  /**
   * Check many events; returns {checked, byType: Map type → count, unknownTypes: [...], problems: Map
   * 'type: problem' → count, notes: the same for nulls in optional, non-nullable fields}.
   */
  checkAll(events) {
    const byType = new Map();
    const unknownTypes = new Set();
    const problems = new Map();
    const notes = new Map();
    for (const raw of events) {
      const ev = stripRecording(raw);
      byType.set(ev.type, (byType.get(ev.type) || 0) + 1);
      const r = this.check(ev);
      if (!r.known) unknownTypes.add(ev.type);
      else {
        for (const p of r.problems) problems.set(p, (problems.get(p) || 0) + 1);
        for (const n of r.notes) notes.set(n, (notes.get(n) || 0) + 1);
      }
    }
    return { checked: events.length, byType, unknownTypes: [...unknownTypes], problems, notes };
  }
}

// A note is a problem string marked as not failing (see objectProblems).
const NOTE = '\u0000note:';
const note = (msg) => NOTE + msg;
const isNote = (x) => x.startsWith(NOTE);

/** The recording fields our pages add to each event (t, textFrame, generic, schemaIssues) removed. */
function stripRecording(ev) {
  const { t, textFrame, generic, schemaIssues, ...rest } = ev;
  return rest;
}

function show(v) {
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 60 ? s.slice(0, 60) + '…' : s;
}

const cached = new Map();

/** The parsed shapes of the installed `openai` package (cached per process and file). */
export function serverEventShapes(file = REALTIME_DTS, unionName = file === LIVE_DTS ? 'ServerEvent' : 'RealtimeServerEvent') {
  if (cached.has(file)) return cached.get(file);
  if (!fs.existsSync(file)) throw new Error(`${file} missing: run npm ci in tests/e2e (openai comes with @openai/agents-realtime)`);
  let version = null;
  try {
    version = JSON.parse(fs.readFileSync(path.join(path.dirname(file), '..', '..', 'package.json'), 'utf8')).version;
  } catch {
    /* not fatal */
  }
  const shapes = new Shapes(parseDeclarations(stripComments(fs.readFileSync(file, 'utf8'))), file, version, unionName);
  cached.set(file, shapes);
  return shapes;
}

/**
 * Assert that every one of `events` (server events, as recorded by the pages or read from the call's
 * event log) has a type in RealtimeServerEvent and the shape of its interface. Logs one summary line; on
 * failure the message lists each distinct problem with its count. Returns the checkAll result.
 */
export function assertServerEventShapes(assert, events, label, file = REALTIME_DTS) {
  const shapes = serverEventShapes(file);
  const union = shapes.unionName;
  const dts = path.basename(file);
  const res = shapes.checkAll(events);
  const types = [...res.byType].map(([t, n]) => (n > 1 ? `${t}×${n}` : t)).join(', ');
  console.log(
    `${label}: ${res.checked} server events of ${res.byType.size} types checked against openai@${shapes.version} ${dts}: ` +
      (res.unknownTypes.length || res.problems.size
        ? `${res.unknownTypes.length} types not in ${union}, ${res.problems.size} shape problems`
        : `all in ${union}, all shapes match`) +
      ` (${types})`,
  );
  if (res.notes.size) {
    console.log(
      `${label}: notes (not failures): ${[...res.notes].map(([n, k]) => `${n}${k > 1 ? ` (×${k})` : ''}`).join('; ')}`,
    );
  }
  const lines = [
    ...res.unknownTypes.map((t) => `not in the ${union} union: ${t}`),
    ...[...res.problems].map(([p, n]) => `${p}${n > 1 ? ` (×${n})` : ''}`),
  ];
  assert.deepEqual(lines, [], `${label}: server events that do not match openai@${shapes.version} ${dts}`);
  return res;
}
