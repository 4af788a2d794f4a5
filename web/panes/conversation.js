// Conversation: one entry per conversation item, in the order items first appear, keyed by item id.
//   user speech   conversation.item.added (input_audio) opens it; ...input_audio_transcription.delta
//                 appends, .completed replaces (the stubs have no recognizer: "[speech, 2.4 s]")
//   user text     conversation.item.added with input_text content
//   assistant     response.output_audio_transcript.delta / .done, response.output_text.delta / .done
//   tool call     function_call items: name + arguments, then the function_call_output under it
//   response      a response.done whose status is not "completed": status + status_details
//   error         server error events
//   Live          session.input_transcript.delta / session.output_transcript.delta, grouped into one
//                 entry per stretch of one speaker (Live has no items); delegations and session.closed
// window.voiceEdge.conversation mirrors the entries: [{id, kind, role, text, final, ...}].
import { $, el, on } from '../lib.js';

export function init({ ve }) {
  const box = $('#conversation');
  let entries; // id -> {id, kind, role, text, final, node}
  let byCall; // call_id -> entry (tool calls)
  let liveTurn; // {n, role} of the Live entry deltas go to

  function reset() {
    entries = new Map();
    byCall = new Map();
    liveTurn = { n: 0, role: null };
    ve.conversation = [];
    box.textContent = '';
    box.appendChild(el('p', { class: 'empty' }, 'Speak, or type a message: each turn shows here.'));
  }

  function place(node) {
    const empty = box.querySelector('.empty');
    if (empty) empty.remove();
    box.appendChild(node);
    box.scrollTop = box.scrollHeight;
  }

  /** The entry for item `id`, created (as `role`) if new. */
  function entry(id, role, kind = 'message') {
    let e = entries.get(id);
    if (e) return e;
    const text = el('span', { class: 'text' });
    const meta = el('span', { class: 'meta' });
    const node = el('div', { class: `turn ${role} ${kind}`, dataset: { itemId: id, role } }, el('span', { class: 'who' }, role), text, meta);
    e = { id, kind, role, text: '', final: false, node, textNode: text, metaNode: meta };
    entries.set(id, e);
    ve.conversation.push(pub(e));
    place(node);
    return e;
  }

  /** The plain-data view of an entry that window.voiceEdge.conversation holds. */
  function pub(e) {
    return (e.pub ||= { id: e.id, kind: e.kind, role: e.role, text: '', final: false });
  }

  function setText(e, text, final) {
    e.text = text;
    e.final = final;
    e.textNode.textContent = text || (final ? '(empty)' : '…');
    e.node.classList.toggle('final', final);
    Object.assign(pub(e), { text, final });
  }

  function setMeta(e, text) {
    e.metaNode.textContent = text;
  }

  function contentText(content) {
    for (const c of content || []) {
      if (typeof c.text === 'string') return c.text;
      if (typeof c.transcript === 'string') return c.transcript;
    }
    return null;
  }

  function onItem(item, done) {
    if (!item || !item.id) return;
    if (item.type === 'message') {
      const e = entry(item.id, item.role || 'unknown');
      const text = contentText(item.content);
      if (text != null && (text || !e.text)) setText(e, text, done || item.role !== 'assistant');
      else if (!e.text) setText(e, '', false);
      const kinds = (item.content || []).map((c) => c.type).join(', ');
      if (kinds && !e.metaNode.textContent) setMeta(e, kinds);
    } else if (item.type === 'function_call') {
      toolCall(item.id, item.call_id, item.name, item.arguments, done);
    } else if (item.type === 'function_call_output') {
      toolOutput(item.call_id, item.output, item.id);
    }
  }

  function toolCall(itemId, callId, name, args, final) {
    const e = entry(itemId, 'tool', 'function_call');
    if (callId) byCall.set(callId, e);
    e.callId = callId || e.callId;
    e.name = name || e.name;
    if (args != null) e.args = args;
    setText(e, `${e.name || '?'}(${e.args || ''})`, !!final);
    if (e.callId) setMeta(e, `call ${e.callId}`);
    Object.assign(pub(e), { name: e.name, args: e.args, callId: e.callId });
  }

  function toolOutput(callId, output, itemId) {
    const call = byCall.get(callId);
    if (!call) {
      const e = entry(itemId || `output:${callId}`, 'tool', 'function_call_output');
      setText(e, `→ ${output}`, true);
      setMeta(e, `output for unknown call ${callId}`);
      return;
    }
    if (itemId) entries.set(itemId, call);
    let out = call.node.querySelector('.output');
    if (!out) call.node.appendChild((out = el('div', { class: 'output' })));
    out.textContent = `→ ${output}`;
    pub(call).output = output;
  }

  function status(id, kind, text) {
    const e = entry(id, 'status', kind);
    setText(e, text, true);
  }

  on('call:start', reset);

  /** A Live transcript delta: appended to the speaker's entry, or a new one when the speaker changed. */
  function liveDelta(role, delta) {
    if (liveTurn.role !== role) liveTurn = { n: liveTurn.n + 1, role };
    const e = entry(`live:${liveTurn.n}`, role);
    setText(e, e.text + (delta || ''), false);
  }

  on('event:in', ({ ev }) => {
    switch (ev.type) {
      case 'session.input_transcript.delta':
        liveDelta('user', ev.delta);
        break;
      case 'session.output_transcript.delta':
        liveDelta('assistant', ev.delta);
        break;
      case 'session.delegation.created': {
        const d = ev.delegation || {};
        status(`del:${d.id}`, 'function_call', `delegated to ${d.target} (${d.id}) at ${ev.offset_ms} ms`);
        liveTurn = { n: liveTurn.n, role: null };
        break;
      }
      case 'session.closed':
        status(`closed:${ev.event_id}`, 'response-cancelled', `session closed: ${ev.reason} after ${ev.usage && ev.usage.seconds} s`);
        break;
      case 'conversation.item.added':
      case 'conversation.item.done':
      case 'conversation.item.retrieved':
        onItem(ev.item, ev.type !== 'conversation.item.added');
        break;
      case 'conversation.item.input_audio_transcription.delta': {
        const e = entry(ev.item_id, 'user');
        setText(e, (e.final ? '' : e.text) + (ev.delta || ''), false);
        break;
      }
      case 'conversation.item.input_audio_transcription.completed':
        setText(entry(ev.item_id, 'user'), ev.transcript || '', true);
        break;
      case 'conversation.item.input_audio_transcription.failed':
        setMeta(entry(ev.item_id, 'user'), `transcription failed: ${(ev.error && ev.error.message) || 'no detail'}`);
        break;
      case 'response.output_audio_transcript.delta':
      case 'response.output_text.delta': {
        const e = entry(ev.item_id, 'assistant');
        setText(e, e.text + (ev.delta || ''), false);
        break;
      }
      case 'response.output_audio_transcript.done':
        setText(entry(ev.item_id, 'assistant'), ev.transcript || '', true);
        break;
      case 'response.output_text.done':
        setText(entry(ev.item_id, 'assistant'), ev.text || '', true);
        break;
      case 'response.output_item.added':
      case 'response.output_item.done':
        if (ev.item && ev.item.type === 'function_call') onItem(ev.item, ev.type.endsWith('.done'));
        break;
      case 'response.function_call_arguments.delta': {
        const e = entries.get(ev.item_id);
        toolCall(ev.item_id, ev.call_id, e && e.name, ((e && e.args) || '') + (ev.delta || ''), false);
        break;
      }
      case 'response.function_call_arguments.done':
        toolCall(ev.item_id, ev.call_id, ev.name, ev.arguments, true);
        break;
      case 'conversation.item.truncated': {
        const e = entries.get(ev.item_id);
        if (e) setMeta(e, `truncated at ${ev.audio_end_ms} ms of audio (interrupted)`);
        break;
      }
      case 'conversation.item.deleted': {
        const e = entries.get(ev.item_id);
        if (e) {
          e.node.classList.add('deleted');
          setMeta(e, 'deleted');
        }
        break;
      }
      case 'response.done': {
        const r = ev.response || {};
        // Fill in any item whose text never streamed (e.g. a done without deltas).
        for (const item of r.output || []) if (item && item.id) onItem(item, true);
        if (r.status && r.status !== 'completed') {
          const d = r.status_details || {};
          const why = [d.type !== r.status && d.type, d.reason, d.error && (d.error.message || d.error.code)].filter(Boolean).join(' · ');
          status(`resp:${r.id}`, `response-${r.status}`, `response ${r.id || ''} ${r.status}${why ? ': ' + why : ''}`);
        }
        break;
      }
      case 'error': {
        const err = ev.error || {};
        status(`err:${ev.event_id || Math.random()}`, 'server-error', `error: ${err.message || JSON.stringify(err)}${err.code ? ` (${err.code})` : ''}`);
        break;
      }
    }
  });

  reset();
}
