package testenv

import (
	"context"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ApplyCRD creates crd, or replaces the spec of the CRD of that name with
// crd's — how a test installs version N of a CRD, creates objects, then
// upgrades the CRD to N+1 in place — and waits (up to a minute) until every
// served version is served (Established, discoverable). The API server
// validates the change as it would any upgrade: removing a version still in
// status.storedVersions is refused, and the error returned. It returns the
// CRD as stored. Deleting it is the caller's (t.Cleanup).
func (e *Env) ApplyCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsv1.CustomResourceDefinition, error) {
	want := crd.DeepCopy()
	cur := &apiextensionsv1.CustomResourceDefinition{}
	err := e.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, cur)
	switch {
	case apierrors.IsNotFound(err):
		cur = want.DeepCopy()
		err = e.Client.Create(ctx, cur)
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
