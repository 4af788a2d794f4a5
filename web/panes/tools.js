// Tools: the Realtime GA function-calling flow, by hand.
//   1. Declare tools (a JSON array, or one tool object) and a tool_choice; Apply sends
//      session.update {session: {type: "realtime", tools, tool_choice}} and shows what the server's
//      session.updated echoed (or the error that answered it).
//   2. Each response.function_call_arguments.done (call_id, name, arguments) shows as a call with an
//      editable output; Reply sends conversation.item.create {item: {type: "function_call_output",
//      call_id, output}} and then response.create, so the model answers with the result. With
//      auto-reply on, that happens as soon as the call arrives.
// window.voiceEdge.toolCalls: [{callId, name, arguments, output, replied, error}].
import { $, el, on } from '../lib.js';

export const SAMPLE_TOOL = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: {
    type: 'object',
    properties: {
      city: { type: 'string', examples: ['Paris'] },
      unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
    },
    required: ['city', 'unit'],
  },
};
export const SAMPLE_OUTPUT = '{"temperature_c": 21, "conditions": "sunny"}';

export function init({ ve, send }) {
  const json = $('#tools-json');
  const choice = $('#tool-choice');
  const apply = $('#tools-apply');
  const status = $('#tools-status');
  const autoReply = $('#tool-autoreply');
  const callsBox = $('#tool-calls');
  let seq = 0;
  let pending = null; // event_id of the session.update awaiting its session.updated / error
  let calls; // call_id -> {callId, name, arguments, output, replied, error, node}

  json.value = JSON.stringify([SAMPLE_TOOL], null, 2);

  function say(text, kind = 'info') {
    status.textContent = text;
    status.dataset.kind = kind;
  }

  /** The declared tools as an array; throws with a message to show. */
  function parseTools() {
    let v;
    try {
      v = JSON.parse(json.value || '[]');
    } catch (e) {
      throw new Error(`tools: not valid JSON: ${e.message}`);
    }
    if (v && !Array.isArray(v) && typeof v === 'object') v = [v];
    if (!Array.isArray(v)) throw new Error('tools: give a JSON array of tools (or one tool object)');
    return v;
  }

  /** Keep the tool_choice select's function options in step with the declared tools. */
  function refreshChoices() {
    let names = [];
    try {
      names = parseTools()
        .filter((t) => t && t.type === 'function' && typeof t.name === 'string')
        .map((t) => t.name);
    } catch (_) {
      return; // shown when Apply is pressed
    }
    const keep = choice.value;
    for (const o of [...choice.options]) if (o.value.startsWith('function:')) o.remove();
    for (const n of names) choice.appendChild(el('option', { value: `function:${n}` }, `function: ${n}`));
    if ([...choice.options].some((o) => o.value === keep)) choice.value = keep;
  }

  function toolChoice() {
    const v = choice.value;
    return v.startsWith('function:') ? { type: 'function', name: v.slice('function:'.length) } : v;
  }

  apply.addEventListener('click', () => {
    try {
      const tools = parseTools();
      const event_id = `demo_tools_${++seq}`;
      send({ type: 'session.update', event_id, session: { type: 'realtime', tools, tool_choice: toolChoice() } });
      pending = event_id;
      say(`sent session.update (${tools.length} tool${tools.length === 1 ? '' : 's'}), waiting for session.updated…`);
    } catch (e) {
      say(e.message, 'error');
    }
  });
  json.addEventListener('input', refreshChoices);

  function reset() {
    calls = new Map();
    ve.toolCalls = [];
    pending = null;
    callsBox.textContent = '';
    callsBox.appendChild(el('p', { class: 'empty' }, 'Function calls the model makes show here.'));
    say('Apply sends the tools and tool_choice in a session.update.');
  }

  function addCall(ev) {
    if (calls.has(ev.call_id)) return;
    const rec = { callId: ev.call_id, name: ev.name || null, arguments: ev.arguments, output: SAMPLE_OUTPUT, replied: false, error: null };
    const output = el('textarea', { class: 'tool-output', rows: 2, spellcheck: 'false', value: SAMPLE_OUTPUT });
    const reply = el('button', { type: 'button', class: 'tool-reply' }, 'Reply');
    const state = el('span', { class: 'tool-state' }, 'waiting for your reply');
    let args = ev.arguments;
    try {
      args = JSON.stringify(JSON.parse(ev.arguments), null, 1).replace(/\n\s*/g, ' ');
    } catch (_) {
      /* shown as sent */
    }
    const node = el(
      'div',
      { class: 'tool-call', dataset: { callId: ev.call_id } },
      el('div', { class: 'sig' }, el('b', {}, rec.name || '(no name)'), `(${args})`, el('small', {}, ` ${ev.call_id}`)),
      output,
      el('div', { class: 'row' }, reply, state),
    );
    rec.node = node;
    const empty = callsBox.querySelector('.empty');
    if (empty) empty.remove();
    callsBox.appendChild(node);
    calls.set(ev.call_id, rec);
    const pub = { callId: rec.callId, name: rec.name, arguments: rec.arguments, output: null, replied: false, error: null };
    ve.toolCalls.push(pub);

    const doReply = () => {
      rec.output = output.value;
      try {
        send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: rec.callId, output: rec.output } });
        send({ type: 'response.create' });
      } catch (e) {
        rec.error = pub.error = e.message;
        state.textContent = e.message;
        state.dataset.kind = 'error';
        return;
      }
      rec.replied = pub.replied = true;
      pub.output = rec.output;
      reply.disabled = true;
      output.readOnly = true;
      state.textContent = 'replied (function_call_output + response.create)';
      state.dataset.kind = 'ok';
    };
    reply.addEventListener('click', doReply);
    if (autoReply.checked) doReply();
  }

  on('call:start', reset);
  on('event:in', ({ ev }) => {
    if (ev.type === 'response.function_call_arguments.done' && ev.call_id) {
      addCall(ev);
    } else if (ev.type === 'session.updated' && pending) {
      const s = ev.session || {};
      const n = Array.isArray(s.tools) ? s.tools.length : 0;
      const tc = typeof s.tool_choice === 'object' && s.tool_choice ? `function ${s.tool_choice.name}` : s.tool_choice;
      say(`applied: the session has ${n} tool${n === 1 ? '' : 's'}, tool_choice ${tc ?? '(not echoed)'}`, 'ok');
      pending = null;
    } else if (ev.type === 'error' && pending && ev.error && ev.error.event_id === pending) {
      say(`refused: ${ev.error.message || JSON.stringify(ev.error)}${ev.error.param ? ` (${ev.error.param})` : ''}`, 'error');
      pending = null;
    }
  });

  refreshChoices();
  reset();
}
