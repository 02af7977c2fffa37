package testenv

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ApplyCRD creates crd, or replaces the spec of the CRD of that name with
// crd's — how a test installs version N of a CRD, creates objects, then
// upgrades the CRD to N+1 — and waits until every served version is
// served (Established, discoverable). The API server validates the change
// as it would any upgrade (a version still in status.storedVersions cannot
// be removed: the error is returned). With cleanup true the CRD is deleted
// when the test ends. It returns the CRD as stored.
func (e *Env) ApplyCRD(tb testing.TB, crd *apiextensionsv1.CustomResourceDefinition, cleanup bool) (*apiextensionsv1.CustomResourceDefinition, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := crd.DeepCopy()
	cur := &apiextensionsv1.CustomResourceDefinition{}
	err := e.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, cur)
	switch {
	case apierrors.IsNotFound(err):
		cur = want
		err = e.Client.Create(ctx, cur)
		if err == nil && cleanup {
			tb.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_ = e.Client.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: crd.ObjectMeta})
			})
		}
	case err == nil:
		cur.Spec = want.Spec
		err = e.Client.Update(ctx, cur)
	}
	if err != nil {
		return nil, err
	}
	if err := envtest.WaitForCRDs(e.Config, []*apiextensionsv1.CustomResourceDefinition{want}, envtest.CRDInstallOptions{
		MaxTime: time.Minute, PollInterval: 50 * time.Millisecond,
	}); err != nil {
		return nil, err
	}
	return cur, nil
}
