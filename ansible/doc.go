// Package ansible delegates the reconcile of a custom resource kind to an
// Ansible playbook (or role), as operator-sdk's Ansible operator does: a
// [Watch] maps a kind to its playbook and, optionally, a finalizer
// playbook; a [Runner] runs ansible-playbook for one object and turns the
// run into status conditions, events and an outcome-classified error.
// reconciler.Builder.Playbook composes it with opkit's reconcile skeleton
// (finalizer, status patch, requeue policy, observability).
//
// Guarantees, for a Runner built by [New]:
//
//   - One ansible-playbook process per run, on localhost with the local
//     connection, given the object as variables ([Runner.Vars]): the spec's
//     fields at the top level in snake_case ("replicaCount" →
//     replica_count, recursively; [Watch.KeepCamelCase] keeps them as
//     written), ansible_operator_meta (name, namespace, uid, generation,
//     labels, annotations), the whole object under "_<group>_<kind>"
//     ("_web_example_com_site") and ansible_python_interpreter
//     ([DefaultPythonInterpreter], /usr/bin/python3, where Debian's
//     python3-kubernetes is). The variables go in a 0600 JSON file in a
//     private temporary directory, removed after the run, never on the
//     command line. The run's TMPDIR and Ansible's local and remote
//     temporary directories are inside it too, so a run killed at its
//     timeout leaves nothing behind in the system's.
//   - What the run did is read from structured events, not scraped from
//     its output: a small callback plugin shipped inside this package
//     (callback/opkit_events.py, embedded and written next to each run)
//     appends one JSON line per task result, flushed at once, so a run
//     killed half way still reports the tasks it finished and the one it
//     was in. [Result] holds the counts (ok, changed, skipped, failed,
//     ignored), the last [MaxTasks] task results, and the first failed
//     task with its message and, for a kubernetes.core task, the API
//     status code.
//   - Conditions on the object ([Runner.Reconcile]): Running=True before
//     the run (written to the API server with [WithClient]), then Running
//     False with reason Successful or Failed, Successful True/False, and
//     Failed True with the failing task's name, its message and what the
//     run did before it (or False after a success); Ready=True after a
//     success. A kind without status conditions is run without them.
//   - Errors are classified for package outcome by one rule (see
//     [Runner.Reconcile]): a user error is Terminal (Stalled, no retry
//     until the object changes) — a fail or assert task,
//     a 400/422 from the API server in a kubernetes.core task, a playbook
//     ansible-playbook refuses (exit 4 or 5); anything else (a failed task
//     that may succeed later, an unreachable host, a timeout) is Transient
//     and backs off. Messages wrap the object's namespace/name.
//   - One Warning event (client-go events.EventRecorder, reason
//     [ReasonTaskFailed]) per failed task that was not ignored, and one
//     (reason [ReasonTimeout]) for a run killed at its timeout.
//   - Each run is bounded: [Watch.Timeout] (default [DefaultTimeout]) kills
//     ansible-playbook with its whole process group (forked workers and
//     module processes included); at most [Watch.MaxConcurrent] (default
//     [DefaultMaxConcurrent]) runs of a kind at once, reconciles and
//     finalizers together, a run beyond it waiting for a slot (the wait is
//     not counted in the timeout; a cancelled context ends the wait).
//   - The output kept is bounded: the last [DefaultOutputLimit] bytes of
//     the combined stdout and stderr ([WithOutputLimit]); earlier output
//     is dropped and [Result.OutputTruncated] says so. The tail is what
//     holds the failure and the play recap.
//   - Deletion ([Runner.Finalize]): the watch's finalizer playbook runs
//     with the same variables; reconciler.Builder.Playbook keeps the
//     finalizer until a run succeeds.
//   - No global state: every setting is on the Runner; runs share nothing
//     but the concurrency slots of their Runner (and of its copies made by
//     [Runner.With]).
//
// Requirements: ansible-playbook (ansible-core 2.14 or later) on PATH or
// given with [WithCommand], and, for kubernetes.core tasks, the
// kubernetes.core collection and the Python kubernetes client for the
// interpreter given. hack/ensure-ansible.sh installs Debian's ansible
// (which ships kubernetes.core) and python3-kubernetes; `make test` runs it.
// ansible-runner is not used. Each run costs Ansible's start-up: about
// 1.5–2 s of CPU for a one-task playbook.
//
// # Compared with operator-sdk's Ansible operator
//
// Point by point, against operator-sdk's Ansible operator
// (operator-framework/ansible-operator-plugins) as documented:
//
//   - Mapping: operator-sdk reads watches.yaml; [LoadWatches] reads the same
//     format for group, version, kind, playbook, role, vars, finalizer,
//     maxConcurrentReconciles and snakeCaseParameters, plus a timeout of
//     its own, and refuses every other field by name rather than ignoring
//     it (reconcilePeriod, manageStatus, watchDependentResources,
//     watchClusterScopedResources, blacklist, selector, …).
//   - Runner: operator-sdk runs ansible-runner and reads its artifact
//     events over an HTTP event API; this package runs ansible-playbook
//     directly and reads a callback plugin's JSON-lines file. No
//     ansible-runner, no artifacts directory kept after the run.
//   - Variables: the same snake_case spec fields, the same
//     ansible_operator_meta (name and namespace; here also uid,
//     generation, labels and annotations) and the same "_<group>_<kind>"
//     raw object; operator-sdk also passes "_<group>_<kind>_spec", which
//     this package does not.
//   - Cluster access: operator-sdk's playbooks talk to the API server
//     through a caching proxy in the operator that injects owner
//     references and watches what the playbook creates
//     (watchDependentResources). Here kubernetes.core talks to the API
//     server directly ([WithKubeconfig], or the in-cluster config); the
//     playbook sets its own ownerReferences, and nothing the playbook
//     creates is watched — a change to a child is corrected at the next
//     reconcile of its owner, not at once.
//   - Status: operator-sdk writes Running, Successful and Failure
//     conditions with an ansibleResult field (ok, changed, skipped,
//     failures); this package writes Running, Successful and Failed as
//     metav1.Conditions (the counts in the message), plus the kstatus
//     conditions Ready, Reconciling and Stalled through package outcome,
//     so kubectl wait, Flux and Argo CD read the object correctly. The
//     playbook cannot write status itself (operator-sdk's k8s_status
//     module and manageStatus: false are not implemented).
//   - Failures: operator-sdk requeues every failed run with backoff; here a
//     user error is Stalled and not retried until the object changes, the
//     rest backs off, and the failing task is named in the condition and in
//     an event.
//   - Bounds: operator-sdk has maxConcurrentReconciles per kind and an
//     ansible-runner timeout setting; here both per [Watch], the timeout
//     killing the whole process group, and the output kept bounded.
//   - Periodic re-runs (reconcilePeriod) are not implemented: a run is
//     triggered by a change of the object (generation, labels,
//     annotations, finalizers, deletion) or by a retry.
package ansible
