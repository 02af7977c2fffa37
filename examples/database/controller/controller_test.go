package controller_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opkit/opkit/examples/database/controller"
)

func pod(ordinal int, revision string, ready bool) corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%d", ordinal), Labels: map[string]string{
			appsv1.PodIndexLabel: fmt.Sprint(ordinal), appsv1.ControllerRevisionHashLabelKey: revision,
		}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func TestUpdatedFromTop(t *testing.T) {
	cases := []struct {
		name string
		pods []corev1.Pod
		want int32
	}{
		{"none updated", []corev1.Pod{pod(0, "old", true), pod(1, "old", true), pod(2, "old", true)}, 0},
		{"top updated, not ready", []corev1.Pod{pod(0, "old", true), pod(1, "old", true), pod(2, "new", false)}, 0},
		{"top updated and ready", []corev1.Pod{pod(0, "old", true), pod(1, "old", true), pod(2, "new", true)}, 1},
		{"top missing (being recreated)", []corev1.Pod{pod(0, "old", true), pod(1, "new", true)}, 0},
		{"gap: a lower one updated does not count", []corev1.Pod{pod(0, "new", true), pod(1, "old", true), pod(2, "new", true)}, 1},
		{"all updated and ready", []corev1.Pod{pod(0, "new", true), pod(1, "new", true), pod(2, "new", true)}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := controller.UpdatedFromTop(tc.pods, 3, "new"); got != tc.want {
				t.Fatalf("UpdatedFromTop = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestREADMEShowsTheStateDiagram keeps the README's diagram equal to the
// declared machine.
func TestREADMEShowsTheStateDiagram(t *testing.T) {
	diagram, err := controller.Diagram()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```mermaid\n"+diagram+"```") {
		t.Fatalf("README.md does not show the machine's diagram; paste this:\n```mermaid\n%s```", diagram)
	}
}
