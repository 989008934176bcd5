"""The viewer's page: one HTML shell, one stylesheet, one script; no library, nothing fetched
from elsewhere. The script builds every node with createElement/textContent: model text never
goes through innerHTML, so a `<script>` in a message is shown as text."""

from __future__ import annotations

PAGE_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>flower-batch view</title>
<link rel="stylesheet" href="/app.css"></head>
<body>
<header><h1>flower-batch view</h1><span id="home" class="meta"></span><span id="live" class="meta"></span></header>
<div class="layout">
<nav><h2>Batches</h2><ul id="batches"></ul></nav>
<main id="main">
<p id="hint" class="meta">Pick a batch.</p>
<section id="jobs-panel" class="hidden">
<h2 id="batch-title"></h2>
<div class="controls"><span id="status-buttons"></span>
<input id="filter" type="search" placeholder="filter: id, task, variant, axis, reason">
<button id="prev">&larr;</button><span id="count" class="meta"></span><button id="next">&rarr;</button></div>
<table id="jobs"><thead><tr><th>job</th><th>status</th><th>task</th><th>variant / axes</th><th>cost</th>
<th>turns</th><th>duration</th><th>reason</th></tr></thead><tbody></tbody></table>
</section></main></div>
<script src="/app.js"></script>
</body></html>
"""

APP_CSS = """
:root { --good:#1a7f37; --bad:#cf222e; --none:#6e7781; --line:#d0d7de; --bg:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1f2328; }
header { padding: 8px 16px; border-bottom: 1px solid var(--line); display: flex; gap: 16px; align-items: baseline; }
h1 { font-size: 18px; margin: 0; } h2 { font-size: 16px; margin: 8px 0; }
.layout { display: flex; }
nav { width: 240px; flex: none; padding: 8px 12px; border-right: 1px solid var(--line); min-height: 90vh; }
nav ul { list-style: none; padding: 0; margin: 0; }
nav li { padding: 4px 6px; cursor: pointer; border-radius: 4px; word-break: break-all; }
nav li.on { background: #ddf4ff; font-weight: 600; }
main { flex: 1; padding: 8px 16px; min-width: 0; }
.meta { color: var(--none); font-size: 12px; }
.controls { display: flex; gap: 8px; align-items: center; margin: 6px 0; flex-wrap: wrap; }
.controls input { padding: 4px 8px; min-width: 260px; border: 1px solid var(--line); border-radius: 6px; }
button { border: 1px solid var(--line); background: white; border-radius: 6px; padding: 2px 8px; cursor: pointer; }
button.on { background: #0969da; color: white; border-color: #0969da; }
table#jobs { border-collapse: collapse; width: 100%; }
#jobs th, #jobs td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
tr.job { cursor: pointer; } tr.job:hover { background: var(--bg); } tr.job.open { background: #ddf4ff; }
.id { font-family: ui-monospace, monospace; font-weight: 600; }
.badge { border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600; color: white; background: var(--none); }
.s-passed { background: var(--good); } .s-failed, .s-timeout, .s-budget { background: var(--bad); }
.s-error, .s-unreadable { background: #8250df; } .reward { font-weight: 600; color: #8250df; } .s-running { background: #0969da; } .s-queued, .s-paused { background: #9a6700; }
td.trajectory { background: #fbfcfd; padding: 8px 12px 16px; }
.kv td { border: none !important; padding: 1px 12px 1px 0 !important; } .kv td:first-child { color: #57606a; }
details { margin: 4px 0; } summary { cursor: pointer; }
details.step { border: 1px solid var(--line); border-radius: 6px; padding: 2px 8px; background: white; }
details.step > summary { display: flex; gap: 12px; flex-wrap: wrap; align-items: baseline; }
.k-judge { background: #8250df; } .k-round, .k-retry { background: #9a6700; } .k-step { background: #57606a; }
.msg { margin: 6px 0; padding: 4px 8px; border-left: 3px solid var(--line); white-space: pre-wrap; word-break: break-word; }
.msg.user { border-color: #54aeff; } .msg.assistant { border-color: var(--good); } .msg.thinking { border-color: #d4a72c; color: #57606a; }
.who { font-size: 11px; font-weight: 700; color: #57606a; display: block; }
details.tool, details.subagent, details.fold { border-left: 3px solid #d4a72c; padding-left: 8px; }
details.subagent { border-color: #8250df; margin-left: 8px; }
.handoff { border: 1px dashed #8250df; padding: 4px 8px; margin: 6px 0; border-radius: 6px; }
pre { background: #0d1117; color: #e6edf3; padding: 8px; border-radius: 6px; overflow: auto; max-height: 420px; white-space: pre-wrap; word-break: break-word; margin: 4px 0; }
pre.diff .add { color: #7ee787; } pre.diff .del { color: #ffa198; } pre.diff .hunk { color: #79c0ff; }
.result.error pre { border: 2px solid var(--bad); }
.f-added { color: var(--good); } .f-removed { color: var(--bad); } .f-changed { color: #9a6700; }
.problem { color: var(--bad); }
.hidden { display: none; }
"""

APP_JS = r"""
(function () {
  'use strict';
  var FOLD_CHARS = 1500, FOLD_LINES = 24, POLL_MS = 2000;
  var state = {batch: null, status: '', q: '', offset: 0, limit: 200, listVersion: null, open: {}, polling: false};

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'class') { node.className = attrs[k]; } else { node.setAttribute(k, attrs[k]); }
    });
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) { return; }
      node.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return node;
  }
  function get(path) {
    return fetch(path, {cache: 'no-store'}).then(function (r) {
      return r.json().then(function (data) {
        if (!r.ok) { throw new Error(data.error || r.statusText); }
        return data;
      });
    });
  }
  function q(params) {
    return Object.keys(params).map(function (k) {
      return encodeURIComponent(k) + '=' + encodeURIComponent(params[k]);
    }).join('&');
  }
  function money(v) { return v === null || v === undefined ? '' : (v < 1 ? '$' + v.toFixed(4) : '$' + v.toFixed(2)); }
  function secs(v) {
    if (v === null || v === undefined) { return ''; }
    return v < 60 ? v.toFixed(1) + ' s' : (v < 3600 ? (v / 60).toFixed(1) + ' min' : (v / 3600).toFixed(1) + ' h');
  }
  function num(v) { return v === null || v === undefined ? '' : String(v); }
  function tokens(t) {
    if (!t || !t.calls) { return ''; }
    return 'in ' + t.input_tokens + ' · cache read ' + t.cache_read_input_tokens + ' · cache write ' +
      t.cache_creation_input_tokens + ' · out ' + t.output_tokens + ' tokens (' + t.calls + ' calls)';
  }
  function badge(text, cls) { return el('span', {'class': 'badge ' + cls}, [text]); }

  // Long text folds into <details>: the summary shows its first line and its size.
  function block(text, cls) {
    text = text || '';
    var lines = text.split('\n');
    if (text.length <= FOLD_CHARS && lines.length <= FOLD_LINES) { return el('pre', {'class': cls || ''}, [text]); }
    return el('details', {'class': 'fold'}, [
      el('summary', {}, [lines[0].slice(0, 120) + ' … (' + text.length + ' characters, ' + lines.length + ' lines)']),
      el('pre', {'class': cls || ''}, [text])]);
  }
  function prose(kind, label, text, key) {
    var body = text.length > FOLD_CHARS ? block(text) : document.createTextNode(text);
    return el('div', {'class': 'msg ' + kind, 'data-key': key}, [el('span', {'class': 'who'}, [label]), body]);
  }

  function messages(list, prefix) {
    var wrap = el('div', {'class': 'messages'});
    list.forEach(function (m, i) {
      var key = prefix + '/' + i;
      if (m.kind === 'user' || m.kind === 'assistant' || m.kind === 'thinking') {
        wrap.appendChild(prose(m.kind, m.kind, m.text, key));
      } else if (m.kind === 'tool_use') {
        var parts = [el('summary', {}, ['tool call ', el('b', {}, [m.name])]), el('div', {'class': 'who'}, ['input']),
                     block(m.input, 'input')];
        if (m.result) {
          parts.push(el('div', {'class': 'result' + (m.result.is_error ? ' error' : '')}, [
            el('div', {'class': 'who'}, [m.result.is_error ? 'result (error)' : 'result']), block(m.result.text)]));
        } else {
          parts.push(el('div', {'class': 'meta'}, ['no result yet']));
        }
        if (m.subagent) {
          var sa = m.subagent;
          parts.push(el('details', {'class': 'subagent', 'data-key': key + '/sub'}, [
            el('summary', {}, ['subagent ' + (sa.agent_type || '') + ': ' + (sa.description || '') +
              (sa.finished ? '' : ' (running)') + '  ' + tokens(sa.tokens)]),
            messages(sa.messages, key + '/sub')]));
        }
        wrap.appendChild(el('details', {'class': 'tool', 'data-key': key, 'data-tool': m.name}, parts));
      } else if (m.kind === 'tool_result') {
        wrap.appendChild(el('div', {'class': 'result'}, [el('div', {'class': 'who'}, ['tool result']), block(m.text)]));
      }
    });
    return wrap;
  }

  function stepNode(s) {
    var key = 'step/' + s.index;
    var kindLabel = s.kind === 'judge' ? 'judge round ' + s.number : s.kind === 'round' ? 'round ' + s.number :
      s.kind === 'retry' ? 'retry ' + s.number : 'step';
    var summary = el('summary', {}, [
      el('b', {}, [s.name]), badge(kindLabel, 'k-' + s.kind), badge(s.ok ? 'ok' : 'failed', s.ok ? 's-passed' : 's-failed'),
      el('span', {}, [money(s.cost_usd)]), el('span', {}, [num(s.num_turns) + ' turns']),
      el('span', {}, [secs(s.duration_s)]), el('span', {'class': 'meta'}, [tokens(s.tokens)])]);
    var body = [];
    if (s.resumes_step) { body.push(el('div', {'class': 'meta'}, ['continues the session of ' + s.resumes_step])); }
    if (s.error) { body.push(el('div', {'class': 'problem'}, ['error: ' + s.error])); }
    s.sessions.forEach(function (sess, i) {
      if (sess.role === 'retired') {
        body.push(el('div', {'class': 'meta'}, ['session ' + sess.session_id + ' (handed over)']));
      } else {
        body.push(el('div', {'class': 'meta'}, ['session ' + sess.session_id]));
      }
      body.push(messages(sess.messages, key + '/s' + i));
      if (sess.role === 'retired' && s.handoff) {
        body.push(el('div', {'class': 'handoff'}, [
          el('b', {}, ['handoff → successor session']), ' ', el('span', {'class': 'meta'}, [s.handoff.doc]),
          s.handoff.problem ? el('div', {'class': 'problem'}, ['(document not shown: ' + s.handoff.problem + ')']) :
          s.handoff.text === null ? el('div', {'class': 'meta'}, ['(document not found in the workspace)']) :
            block(s.handoff.text)]));
      }
    });
    return el('details', {'class': 'step', 'data-key': key, 'data-step': s.name}, [summary].concat(body));
  }

  function diffNode(d) {
    var wrap = el('div', {'class': 'diff-body'});
    if (d.source_missing) {
      wrap.appendChild(el('p', {'class': 'problem'}, ['the task source ' + d.source + ' no longer exists: nothing to compare with']));
      return wrap;
    }
    if (d.workspace_missing) { wrap.appendChild(el('p', {'class': 'problem'}, ['the job has no workspace folder'])); return wrap; }
    wrap.appendChild(el('p', {'class': 'diff-summary'}, [
      d.added + ' added, ' + d.changed + ' changed, ' + d.removed + ' removed · +' + d.lines_added + ' -' + d.lines_removed +
      ' lines' + (d.source ? ' · against ' + d.source : ' · the job started from an empty workspace') +
      (d.truncated ? ' · capped: not everything is shown' : '')]));
    d.files.forEach(function (f) {
      var label = {added: '+', changed: '~', removed: '-'}[f.kind] + ' ' + f.path;
      var parts = [el('summary', {}, [el('span', {'class': 'f-' + f.kind}, [label]), '  +' + f.added_lines + ' -' + f.removed_lines,
        f.note ? '  (' + f.note + ')' : ''])];
      if (f.diff) {
        var pre = el('pre', {'class': 'diff'});
        f.diff.split('\n').forEach(function (ln) {
          var cls = ln.indexOf('+++') === 0 || ln.indexOf('---') === 0 ? '' : ln[0] === '+' ? 'add' : ln[0] === '-' ? 'del' : ln.indexOf('@@') === 0 ? 'hunk' : '';
          pre.appendChild(el('span', {'class': cls}, [ln + '\n']));
        });
        parts.push(pre);
      }
      if (f.diff_truncated) { parts.push(el('div', {'class': 'meta diff-cap'}, ['diff capped here'])); }
      wrap.appendChild(el('details', {'class': 'file', 'data-kind': f.kind, 'data-path': f.path, 'data-key': 'file/' + f.path}, parts));
    });
    return wrap;
  }

  function detailNode(job, data) {
    var r = data.record, spec = r.spec || {}, t = data.trajectory;
    var rows = [['status', r.status + (r.reason ? ' — ' + r.reason : '')], ['attempt', num(r.attempt)],
      ['workflow', spec.workflow || 'starter flow'], ['prompt', spec.prompt || ''], ['started', r.started_at || ''],
      ['finished', r.finished_at || ''], ['cost', money(r.cost_usd)], ['turns', num(r.num_turns)],
      ['workspace source', spec.workspace || '(empty)']].concat(harborRows(r, spec));
    rows = rows.filter(function (p) { return p[1] !== ''; });  // a queued job has no times yet
    var kv = el('table', {'class': 'kv'}, rows.map(function (p) { return el('tr', {}, [el('td', {}, [p[0]]), el('td', {}, [p[1]])]); }));
    var parts = [kv];
    if (t.problem) { parts.push(el('p', {'class': 'problem'}, [t.problem])); }
    parts.push(el('h3', {}, ['Steps (' + t.steps.length + ')']));
    var steps = el('div', {'class': 'steps'});
    t.steps.forEach(function (s) { steps.appendChild(stepNode(s)); });
    t.unlisted_sessions.forEach(function (sess, i) {
      steps.appendChild(el('details', {'class': 'step running', 'data-key': 'running/' + i}, [
        el('summary', {}, [el('b', {}, ['in progress']), el('span', {'class': 'meta'}, ['session ' + sess.session_id + ' · ' + tokens(sess.tokens)])]),
        messages(sess.messages, 'running/' + i)]));
    });
    if (!t.steps.length && !t.unlisted_sessions.length) { steps.appendChild(el('p', {'class': 'meta'}, ['no steps recorded yet'])); }
    parts.push(steps);
    var diff = el('details', {'class': 'diff', 'data-key': 'diff'}, [el('summary', {}, ['workspace diff'])]);
    diff.addEventListener('toggle', function () {
      if (!diff.open || diff.dataset.loaded) { return; }
      diff.dataset.loaded = '1';
      get('/api/diff?' + q({batch: state.batch, job: job})).then(function (d) { diff.appendChild(diffNode(d)); })
        .catch(function (e) { diff.appendChild(el('p', {'class': 'problem'}, [String(e.message)])); });
    });
    parts.push(diff);
    if (r.check_output) { parts.push(el('details', {'data-key': 'check'}, [el('summary', {}, ['check output']), block(r.check_output)])); }
    if (data.log_tail) { parts.push(el('details', {'data-key': 'log'}, [el('summary', {}, ['container log (tail)']), block(data.log_tail)])); }
    return el('div', {'class': 'detail'}, parts);
  }

  // Re-rendering a live job keeps what the reader had open.
  function openKeys(root) {
    var keys = {};
    root.querySelectorAll('details[open][data-key]').forEach(function (d) { keys[d.dataset.key] = true; });
    return keys;
  }
  function reopen(root, keys) {
    root.querySelectorAll('details[data-key]').forEach(function (d) {
      if (keys[d.dataset.key] && d.dataset.key !== 'diff') { d.open = true; }
    });
  }

  function loadDetail(job) {
    var entry = state.open[job];
    if (!entry || entry.busy) { return Promise.resolve(); }
    entry.busy = true;
    var params = {batch: state.batch, job: job};
    if (entry.version) { params.since = entry.version; }
    return get('/api/job?' + q(params)).then(function (data) {
      if (data.unchanged || state.open[job] !== entry) { return; }
      var keys = openKeys(entry.cell);
      entry.version = data.version;
      entry.cell.replaceChildren(detailNode(job, data));
      reopen(entry.cell, keys);
    }).catch(function (e) {
      entry.cell.replaceChildren(el('p', {'class': 'problem'}, [String(e.message)]));
    }).then(function () { entry.busy = false; });
  }

  function toggle(job, tr) {
    if (state.open[job]) {
      state.open[job].row.remove();
      delete state.open[job];
      tr.classList.remove('open');
      history.replaceState(null, '', '#' + q({batch: state.batch}));
      return;
    }
    history.replaceState(null, '', '#' + q({batch: state.batch, job: job}));  // a link to this job
    var cell = el('td', {'colspan': '8', 'class': 'trajectory'}, [el('p', {'class': 'meta'}, ['loading…'])]);
    var row = el('tr', {'class': 'detail', 'data-detail-for': job}, [cell]);
    tr.after(row);
    tr.classList.add('open');
    state.open[job] = {row: row, cell: cell, version: null};
    loadDetail(job);
  }

  // A graded job's reward beside its status (a job without a verifier shows nothing more).
  function rewardNote(reward) {
    if (!reward || typeof reward.value !== 'number') { return null; }
    return el('span', {'class': 'reward'}, [' reward ' + reward.value.toFixed(2)]);
  }

  function harborRows(r, spec) {
    var h = spec.harbor, rows = [];
    if (r.reward && typeof r.reward.value === 'number') {
      var detail = Object.keys(r.reward.detail || {}).map(function (k) { return k + ' ' + r.reward.detail[k]; }).join(', ');
      var need = spec.pass_reward != null ? spec.pass_reward : (spec.verifier ? spec.verifier.pass_reward : null);
      var at = need != null ? ' (passes at ' + need + ')' : '';
      rows.push(['reward', r.reward.value + at + (detail ? ' · ' + detail : '')]);
    }
    if (h) {
      var m = h.metadata || {};
      var meta = ['difficulty', 'category'].filter(function (k) { return m[k]; }).map(function (k) { return k + ' ' + m[k]; })
        .concat(m.tags ? ['tags ' + [].concat(m.tags).join(', ')] : []).join(' · ');
      rows.push(['harbor task', h.folder + ' (' + h.digest + ')']);
      if (meta) { rows.push(['metadata', meta]); }
      rows.push(['network', 'asks ' + h.network_policy + ', ran ' + (spec.network || 'gateway')]);
    }
    return rows;
  }

  function jobRow(j) {
    var tr = el('tr', {'class': 'job', 'data-job': j.id, 'data-status': j.status}, [
      el('td', {'class': 'id'}, [j.id]), el('td', {}, [badge(j.status, 's-' + j.status), rewardNote(j.reward)]), el('td', {}, [j.task]),
      el('td', {}, [j.variant + (j.matrix ? '  ' : ''), el('span', {'class': 'meta'}, [j.matrix || ''])]),
      el('td', {}, [money(j.cost_usd)]), el('td', {}, [num(j.num_turns)]), el('td', {}, [secs(j.duration_s)]),
      el('td', {'class': 'meta'}, [j.reason || ''])]);
    tr.addEventListener('click', function () { toggle(j.id, tr); });
    if (state.open[j.id]) { tr.classList.add('open'); }
    return tr;
  }

  function renderList(data) {
    state.listVersion = data.version + '|' + data.offset + '|' + data.matched;
    var buttons = document.getElementById('status-buttons');
    buttons.replaceChildren(el('button', {'data-status': '', 'class': state.status ? '' : 'on'}, ['all ' + data.total]));
    Object.keys(data.counts).forEach(function (s) {
      buttons.appendChild(el('button', {'data-status': s, 'class': state.status === s ? 'on' : ''}, [s + ' ' + data.counts[s]]));
    });
    buttons.querySelectorAll('button').forEach(function (b) {
      b.addEventListener('click', function () { state.status = b.dataset.status; state.offset = 0; refreshList(true); });
    });
    var tbody = document.querySelector('#jobs tbody');
    var keep = {};
    Object.keys(state.open).forEach(function (id) { keep[id] = state.open[id]; });
    tbody.replaceChildren();
    data.jobs.forEach(function (j) {
      tbody.appendChild(jobRow(j));
      if (keep[j.id]) { tbody.appendChild(keep[j.id].row); delete keep[j.id]; }
    });
    Object.keys(keep).forEach(function (id) { delete state.open[id]; }); // filtered out or paged away
    var last = Math.min(data.offset + data.jobs.length, data.matched);
    document.getElementById('count').textContent = (data.matched ? (data.offset + 1) + '–' + last : '0') + ' of ' +
      data.matched + (data.matched !== data.total ? ' matching (' + data.total + ' jobs)' : ' jobs');
    document.getElementById('prev').disabled = data.offset <= 0;
    document.getElementById('next').disabled = last >= data.matched;
  }

  function refreshList(force) {
    if (!state.batch) { return Promise.resolve(); }
    var params = {batch: state.batch, status: state.status, q: state.q, offset: state.offset, limit: state.limit};
    return get('/api/jobs?' + q(params)).then(function (data) {
      var version = data.version + '|' + data.offset + '|' + data.matched;
      if (force || version !== state.listVersion) { renderList(data); }
    });
  }

  function renderBatches(data) {
    document.getElementById('home').textContent = data.home;
    var ul = document.getElementById('batches');
    ul.replaceChildren();
    data.batches.forEach(function (b) {
      var counts = Object.keys(b.counts).map(function (s) { return b.counts[s] + ' ' + s; }).join(', ');
      var li = el('li', {'data-batch': b.name, 'class': b.name === state.batch ? 'on' : ''}, [
        el('div', {}, [b.name]), el('div', {'class': 'meta'}, [b.jobs + ' jobs' + (counts ? ': ' + counts : '')])]);
      li.addEventListener('click', function () { location.hash = q({batch: b.name}); });
      ul.appendChild(li);
    });
    if (!data.batches.length) { ul.appendChild(el('li', {'class': 'meta'}, ['no batches in this home yet'])); }
  }

  function route() {
    var params = new URLSearchParams(location.hash.slice(1));
    var batch = params.get('batch');
    if (batch !== state.batch) {
      state.batch = batch; state.offset = 0; state.open = {}; state.listVersion = null;
      document.querySelector('#jobs tbody').replaceChildren();
    }
    document.getElementById('jobs-panel').classList.toggle('hidden', !batch);
    document.getElementById('hint').classList.toggle('hidden', !!batch);
    document.getElementById('batch-title').textContent = batch || '';
    document.querySelectorAll('#batches li').forEach(function (li) { li.classList.toggle('on', li.dataset.batch === batch); });
    return refreshList(true).then(function () {
      var job = params.get('job');
      var tr = job && document.querySelector('tr.job[data-job="' + CSS.escape(job) + '"]');
      if (tr && !state.open[job]) { toggle(job, tr); }
    }).catch(showProblem);
  }

  function showProblem(e) { document.getElementById('live').textContent = 'problem: ' + e.message; }

  // The open batch and the open jobs every 2 s; the sidebar's counts (every batch's records) every 10 s.
  var ticks = 0;
  function poll() {
    if (state.polling) { return; }
    state.polling = true;
    ticks += 1;
    var side = ticks % 5 === 0 ? [get('/api/batches').then(renderBatches)] : [];
    Promise.all(side.concat([refreshList(false)], Object.keys(state.open).map(loadDetail)))
      .then(function () { document.getElementById('live').textContent = 'live · updated ' + new Date().toLocaleTimeString(); })
      .catch(showProblem)
      .then(function () { state.polling = false; });
  }

  var timer = null;
  document.getElementById('filter').addEventListener('input', function (e) {
    clearTimeout(timer);
    timer = setTimeout(function () { state.q = e.target.value.trim(); state.offset = 0; refreshList(true).catch(showProblem); }, 150);
  });
  document.getElementById('prev').addEventListener('click', function () {
    state.offset = Math.max(0, state.offset - state.limit); refreshList(true).catch(showProblem);
  });
  document.getElementById('next').addEventListener('click', function () {
    state.offset += state.limit; refreshList(true).catch(showProblem);
  });
  window.addEventListener('hashchange', route);
  get('/api/batches').then(renderBatches).then(route).catch(showProblem);
  setInterval(poll, POLL_MS);
})();
"""
