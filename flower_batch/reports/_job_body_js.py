"""The report's job bodies, built in the browser from the embedded results document.

Each job's inputs, steps, check output and log tail are in results-data already; writing them a
second time as HTML would double the size of a large report (and its parse time). So the page
carries each job's summary line as HTML, and this script fills a job's body the first time it
is opened. Every value goes in through textContent: job text never becomes markup.
"""

from __future__ import annotations

# Offscreen jobs are not laid out or painted until scrolled to: a 5,000-job list opens fast.
JOB_LIST_CSS = "details.job { content-visibility: auto; contain-intrinsic-size: auto 36px; }\n"

JOB_BODY_JS = r"""
(function () {
  // Parsed on first need (a body opened, a text filter typed), not at load: a large report
  // opens as fast as its HTML renders.
  var byId = null;
  var ANSI = /\x1b\[[0-9;?]*[A-Za-z]/g;
  function jobs() {
    if (byId === null) {
      byId = {};
      JSON.parse(document.getElementById('results-data').textContent).jobs.forEach(function (j) { byId[j.id] = j; });
    }
    return byId;
  }
  function el(tag, cls, children) {
    var n = document.createElement(tag);
    if (cls) { n.className = cls; }
    (children || []).forEach(function (c) {
      if (c !== null && c !== undefined) { n.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); }
    });
    return n;
  }
  function duration(s) {
    if (s === null || s === undefined) { return '?'; }
    if (s < 10) { return s.toFixed(1) + 's'; }
    if (s < 60) { return Math.round(s) + 's'; }
    var m = Math.floor(Math.round(s) / 60), sec = Math.round(s) % 60;
    if (m < 60) { return m + 'm' + (sec < 10 ? '0' : '') + sec + 's'; }
    return Math.floor(m / 60) + 'h' + (m % 60 < 10 ? '0' : '') + (m % 60) + 'm';
  }
  function memory(b) {
    if (b === null || b === undefined) { return 'unlimited'; }
    var units = [['g', 1073741824], ['m', 1048576], ['k', 1024]];
    for (var i = 0; i < units.length; i++) { if (b >= units[i][1] && b % units[i][1] === 0) { return (b / units[i][1]) + units[i][0]; } }
    return b + 'b';
  }
  function cost(v) { return v === null || v === undefined ? 'cost ?' : (v < 1 ? '$' + v.toFixed(4) : '$' + v.toFixed(2)); }
  function short(v) {
    var t = (v && typeof v === 'object') ? (v.name || JSON.stringify(v)) : String(v);
    return t.length <= 60 ? t : t.slice(0, 57) + '...';
  }
  function body(j) {
    var i = j.inputs || {}, o = j.outcome;
    var rows = [
      ['workflow', i.workflow || 'starter flow'],
      ['matrix', Object.keys(j.matrix || {}).map(function (k) { return k + '=' + short(j.matrix[k]); }).join(', ')],
      ['prompt', i.prompt || ''],
      ['gateway', (o && o.gateway_mode) || (i.gateway && i.gateway.mode) || ''],
      ['model', i.model || "the workflow's default"],
      ['limits', 'timeout ' + duration(i.timeout_s) + ', cpus ' + (i.cpus || 'unlimited') + ', memory ' +
        memory(i.memory_bytes) + ', budget ' + (i.budget_usd ? cost(i.budget_usd) : 'none')]];
    var h = j.harbor;
    if (h) {
      var m = h.metadata || {};
      rows.push(['harbor task', h.folder + ' (' + (h.digest || '').slice(0, 19) + '…, schema ' + (h.schema_version || '?') + ')']);
      rows.push(['metadata', ['difficulty', 'category'].filter(function (k) { return m[k]; }).map(function (k) { return k + ' ' + m[k]; })
        .concat(m.tags ? ['tags ' + [].concat(m.tags).join(', ')] : []).join(' · ') || 'none']);
      rows.push(['network', 'task.toml asks ' + h.network_policy + '; ran with ' + h.network_as_run]);
    }
    if (o && o.reward) {
      var detail = Object.keys(o.reward.detail || {}).map(function (k) { return k + ' ' + o.reward.detail[k]; }).join(', ');
      rows.push(['reward', o.reward.value + (h && h.pass_reward !== null ? ' (passes at ' + h.pass_reward + ')' : '') +
        (detail ? '; ' + detail : '')]);
    }
    if (o) {
      var verdict = o.workflow_ok ? 'ok' : (o.workflow_ok === false ? 'not ok' : 'unknown');
      rows.push(['verdict', 'workflow ' + verdict + '; check ' + (o.check_exit === null ? 'not run' : 'exit ' + o.check_exit)]);
    }
    var d = j.workspace_diff;
    if (d && d.available) {
      rows.push(['workspace', d.added + ' added, ' + d.changed + ' changed, ' + d.removed + ' removed files; +' +
        d.lines_added + ' -' + d.lines_removed + ' lines' + (d.truncated ? ' (capped)' : '')]);
    } else if (d && d.source_missing) {
      rows.push(['workspace', 'no diff: the task source ' + d.source + ' is gone']);
    }
    var parts = [el('table', 'kv', rows.map(function (r) { return el('tr', '', [el('td', '', [r[0]]), el('td', '', [String(r[1])])]); }))];
    if (o && o.steps && o.steps.length) {
      var head = el('tr', '', ['step', 'ok', 'cost', 'turns', 'duration', 'verdict', 'error'].map(function (h) { return el('th', '', [h]); }));
      var trs = o.steps.map(function (s) {
        return el('tr', '', [s.name, s.ok ? 'ok' : 'failed', cost(s.cost_usd), s.num_turns === null ? '' : String(s.num_turns),
          duration(s.duration_s), s.verdict || '', s.error || ''].map(function (c) { return el('td', '', [c]); }));
      });
      parts.push(el('h4', '', ['Steps']), el('table', 'steps', [head].concat(trs)));
    }
    if (i.check) {
      var exit = (!o || o.check_exit === null) ? '' : ' → exit ' + o.check_exit;
      parts.push(el('h4', '', ['Check' + exit]),
        el('pre', '', ['$ ' + i.check + '\n' + ((o && o.check_output) ? o.check_output : '(no output)').replace(ANSI, '')]));
    }
    if (o && o.log_tail) { parts.push(el('h4', '', ['Log (tail)']), el('pre', '', [o.log_tail.replace(ANSI, '')])); }
    return parts;
  }
  // The text filter (in the report's main script) asks for a job's searchable text.
  window.jobSearchText = function (det) {
    if (det.dataset.search === undefined) {
      var j = jobs()[det.id.slice(4)] || {}, o = j.outcome || {};
      det.dataset.search = [j.id, j.task, j.variant, j.status, JSON.stringify(j.matrix || {}), (j.inputs || {}).prompt,
        o.reason].join(' ').toLowerCase();
    }
    return det.dataset.search;
  };
  // One listener for all jobs: toggle does not bubble, so it is caught on the way down.
  document.addEventListener('toggle', function (e) {
    var det = e.target;
    if (!det.classList || !det.classList.contains('job') || !det.open) { return; }
    var target = det.querySelector('.job-body');
    var j = jobs()[det.id.slice(4)];
    if (j && !target.dataset.built) {
      target.dataset.built = '1';
      body(j).forEach(function (p) { target.appendChild(p); });
    }
  }, true);
})();
"""
