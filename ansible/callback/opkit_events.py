# opkit_events: an Ansible callback plugin shipped (embedded) with opkit's
# ansible package. It appends one JSON object per line to the file named by
# the OPKIT_ANSIBLE_EVENTS environment variable, flushed after each event, so
# a run killed half way (timeout) still leaves what it did. It prints nothing.
from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = '''
    name: opkit_events
    type: notification
    short_description: JSON-lines task events for opkit
    description: One JSON object per task event, appended to $OPKIT_ANSIBLE_EVENTS.
'''

import json
import os

from ansible.plugins.callback import CallbackBase

MAX_FIELD = 4096


def _short(v):
    if v is None:
        return None
    if not isinstance(v, str):
        try:
            v = json.dumps(v, default=str)
        except Exception:
            v = str(v)
    if len(v) > MAX_FIELD:
        v = v[:MAX_FIELD] + '...'
    return v


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'notification'
    CALLBACK_NAME = 'opkit_events'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        path = os.environ.get('OPKIT_ANSIBLE_EVENTS')
        self._f = open(path, 'a') if path else None

    def _emit(self, ev):
        if self._f is None:
            return
        self._f.write(json.dumps(ev, default=str) + '\n')
        self._f.flush()

    def _task(self, event, result, **extra):
        task = result._task
        r = result._result if isinstance(result._result, dict) else {}
        ev = {
            'event': event,
            'task': task.get_name(),
            'action': task.action,
            'host': result._host.get_name(),
            'changed': bool(r.get('changed', False)),
        }
        ev.update(extra)
        return ev, r

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._emit({'event': 'task_start', 'task': task.get_name(), 'action': task.action})

    def v2_runner_on_ok(self, result):
        ev, _ = self._task('ok', result)
        self._emit(ev)

    def v2_runner_on_skipped(self, result):
        ev, _ = self._task('skipped', result)
        self._emit(ev)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        ev, r = self._task('failed', result, ignore_errors=bool(ignore_errors))
        ev['msg'] = _short(r.get('msg') or r.get('reason') or r.get('stderr') or r.get('exception'))
        for k in ('status', 'error', 'reason', 'rc', 'stderr'):
            if k in r and r[k] not in (None, ''):
                ev[k] = _short(r[k]) if k in ('reason', 'stderr') else r[k]
        self._emit(ev)

    def v2_runner_on_unreachable(self, result):
        ev, r = self._task('unreachable', result)
        ev['msg'] = _short(r.get('msg'))
        self._emit(ev)

    def v2_playbook_on_stats(self, stats):
        self._emit({'event': 'stats', 'stats': {h: stats.summarize(h) for h in stats.processed}})
