package ansible

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadEvents: the callback plugin's events file is written by the
// playbook run (its tasks' messages, stderr, a line cut by a kill), so
// readEvents reads untrusted input. Whatever the file holds, it does not
// panic, its counts match the tasks it kept, it keeps at most MaxTasks
// tasks (plus the one running at the end), and the HTTP status it reads
// is 0 or a code in [100, 600).
func FuzzReadEvents(f *testing.F) {
	f.Add(`{"event":"task_start","task":"a","action":"debug"}
{"event":"ok","task":"a","action":"debug","changed":true}
{"event":"failed","task":"b","action":"kubernetes.core.k8s","msg":"Failed: b'{\"kind\":\"Status\",\"code\":409}'","status":409}
{"event":"failed","task":"c","action":"x","ignore_errors":true,"error":"422","stderr":"boom"}
{"event":"skipped","task":"d"}
{"event":"unreachable","task":"e","msg":"gone"}
{"event":"task_start","task":"f"}`)
	f.Add(`{"event":"failed","status":"abc","error":[1,2]}` + "\n" + `{"event":"ok"`)
	f.Add(strings.Repeat(`{"event":"ok","task":"t"}`+"\n", MaxTasks+3))
	f.Add("\x00\xff{\n}\n")
	f.Fuzz(func(t *testing.T, data string) {
		path := filepath.Join(t.TempDir(), "events.jsonl")
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		res := &Result{}
		_ = res.readEvents(path) // a line over the scanner's limit is an error, not a panic
		if len(res.Tasks) > MaxTasks+1 {
			t.Fatalf("%d tasks kept, at most %d", len(res.Tasks), MaxTasks+1)
		}
		if res.Changed > res.Ok {
			t.Fatalf("changed %d > ok %d", res.Changed, res.Ok)
		}
		for _, tk := range res.Tasks {
			if tk.HTTPStatus != 0 && (tk.HTTPStatus < 100 || tk.HTTPStatus >= 600) {
				t.Fatalf("task %q: HTTP status %d", tk.Name, tk.HTTPStatus)
			}
		}
		if res.FailedTask != nil && res.Failed == 0 {
			t.Fatalf("failed task %q with 0 failures counted", res.FailedTask.Name)
		}
	})
}
