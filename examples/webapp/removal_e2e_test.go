package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/opkit/opkit/examples/internal/e2etest"
)

// The demo's reported bug: a config key removed from a WebApp's spec stayed
// in its ConfigMap forever. Declared state is the whole truth: the key the
// operator no longer declares is removed; the one it still declares stays.
func TestRemovedConfigKeyLeavesTheConfigMap(t *testing.T) {
	ns := env.Namespace(t)
	startOperator(t, ns, nil)
	ctx := e2etest.Context(t, 3*time.Minute)
	app := newApp(ns, "hello", 1)
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	waitReady(t, app)

	configMap := func() map[string]string {
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello-config"}, &cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data
	}
	patchConfig := func(patch string) {
		t.Helper()
		if err := env.Client.Patch(ctx, app, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	patchConfig(`{"spec":{"config":{"extra.txt":"more"}}}`)
	e2etest.WaitFor(t, 60*time.Second, "ConfigMap hello-config has extra.txt", func() (bool, error) {
		return configMap()["extra.txt"] == "more", nil
	})
	patchConfig(`{"spec":{"config":{"extra.txt":null}}}`)
	e2etest.WaitFor(t, 60*time.Second, "extra.txt removed from ConfigMap hello-config", func() (bool, error) {
		_, ok := configMap()["extra.txt"]
		return !ok, nil
	})
	if got := configMap()["greeting"]; got != "hello" {
		t.Fatalf("greeting = %q, want the still declared hello", got)
	}
	waitReady(t, app)
}
