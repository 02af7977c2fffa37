package ansible

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/opkit/opkit/outcome"
)

// The message kubernetes.core 2.x gives for a create the API server refused
// (captured from examples/playbook before its replicas were numbers).
const refused = `Failed to create object: b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Deployment in version \\"v1\\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32","reason":"BadRequest","code":400}\n'`

func TestAPIStatusFromTaskResults(t *testing.T) {
	for _, tc := range []struct {
		name           string
		status, errFld string
		msg            string
		want           int
	}{
		{"status field", "422", "", "Failed to patch", 422},
		{"error field as string", "", `"403"`, "Forbidden", 403},
		{"quoted Status in the message", "", "", refused, 400},
		{"none", "", "", "non-zero return code", 0},
		{"a number that is no status", `"abc"`, "", "code 42", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := httpStatus(json.RawMessage(tc.status), json.RawMessage(tc.errFld))
			if got == 0 {
				got = statusInMessage(tc.msg)
			}
			if got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestClassifyRule(t *testing.T) {
	r := &Runner{w: Watch{Timeout: DefaultTimeout}}
	for _, tc := range []struct {
		name string
		res  Result
		want outcome.Class
	}{
		{"success", Result{ExitCode: 0}, outcome.ClassSuccess},
		{"422 from the API server", Result{ExitCode: 2, FailedTask: &Task{Name: "t", Action: "kubernetes.core.k8s", Status: TaskFailed, HTTPStatus: 422}}, outcome.ClassTerminal},
		{"409 from the API server", Result{ExitCode: 2, FailedTask: &Task{Name: "t", Action: "kubernetes.core.k8s", Status: TaskFailed, HTTPStatus: 409}}, outcome.ClassTransient},
		{"short fail action", Result{ExitCode: 2, FailedTask: &Task{Name: "t", Action: "fail", Status: TaskFailed}}, outcome.ClassTerminal},
		{"unreachable", Result{ExitCode: 4, FailedTask: &Task{Name: "t", Status: TaskUnreachable}}, outcome.ClassTransient},
		{"bad options", Result{ExitCode: 5, Output: "ERROR! the playbook: x could not be found"}, outcome.ClassTerminal},
		{"crash", Result{ExitCode: 250, Output: "Traceback"}, outcome.ClassTransient},
		{"timeout", Result{ExitCode: -1, TimedOut: true}, outcome.ClassTransient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := r.classify(&tc.res, "ns/x")
			if c := outcome.Classify(err); c.Class != tc.want {
				t.Errorf("class %v, want %v (%v)", c.Class, tc.want, err)
			}
			if err != nil && !strings.Contains(err.Error(), "ns/x") {
				t.Errorf("error %q does not name the object", err)
			}
		})
	}
}
