package testenv

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

//go:embed kwok-stages.yaml
var kwokStages []byte

const fakeNodeAnnotation = "kwok.x-k8s.io/node"

func (e *Env) startKwok() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        FakeNodeName,
			Annotations: map[string]string{fakeNodeAnnotation: "fake"},
			Labels:      map[string]string{"kubernetes.io/hostname": FakeNodeName, "kubernetes.io/os": "linux", "type": "kwok"},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("500")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("500")},
		},
	}
	if err := e.Client.Create(ctx, node); err != nil {
		return fmt.Errorf("testenv: create fake node: %w", err)
	}
	stages := filepath.Join(e.dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		return err
	}
	serverPort, err := freePort()
	if err != nil {
		return err
	}
	nodePort, err := freePort()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--config=" + stages,
		"--manage-nodes-with-annotation-selector=" + fakeNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(serverPort),
		"--node-port=" + strconv.Itoa(nodePort),
		"--node-ip=10.200.0.1",
		"--cidr=10.201.0.0/16",
		// Renew the node's Lease like a kubelet: without a heartbeat the node
		// lifecycle controller marks the node NotReady after its grace period
		// (~50 s) and every pod on it not ready.
		"--node-lease-duration-seconds=40",
	}
	url := "http://127.0.0.1:" + strconv.Itoa(serverPort) + "/healthz"
	return e.startProcess("kwok", "kwok", args, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %d", url, resp.StatusCode)
		}
		// Ready when the node it manages reports Ready, so pods can be scheduled.
		var n corev1.Node
		if err := e.Client.Get(ctx, clientKey(FakeNodeName), &n); err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s not Ready yet", FakeNodeName)
	})
}
