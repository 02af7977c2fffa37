package v1beta1

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	v1 "github.com/opkit/opkit/examples/webapp/api/v1"
	opconv "github.com/opkit/opkit/webhook/conversion"
)

// v1Only holds the v1 fields v1beta1 has no place for; they travel in the
// annotation opconv.DataAnnotation of a v1beta1 object.
type v1Only struct {
	Headless bool   `json:"headless,omitempty"`
	EnvFrom  string `json:"envFrom,omitempty"`
}

// ConvertTo converts this v1beta1 WebApp to the hub (v1), restoring the
// v1-only fields from the annotation.
func (w *WebApp) ConvertTo(h conversion.Hub) error {
	dst, ok := h.(*v1.WebApp)
	if !ok {
		return fmt.Errorf("v1beta1 WebApp %s/%s: convert to %T, want *v1.WebApp", w.Namespace, w.Name, h)
	}
	w.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec = v1.WebAppSpec{
		Image:    w.Spec.Container.Image,
		Port:     w.Spec.Container.Port,
		Replicas: w.Spec.Replicas,
		Config:   w.Spec.Config,
	}
	w.Status.DeepCopyInto(&dst.Status)
	var lost v1Only
	if _, err := opconv.Restore(&dst.ObjectMeta, &lost); err != nil {
		return fmt.Errorf("v1beta1 WebApp %s/%s: %w", w.Namespace, w.Name, err)
	}
	dst.Spec.Headless, dst.Spec.EnvFrom = lost.Headless, lost.EnvFrom
	return nil
}

// ConvertFrom converts the hub (v1) to this v1beta1 WebApp, keeping the
// v1-only fields in the annotation.
func (w *WebApp) ConvertFrom(h conversion.Hub) error {
	src, ok := h.(*v1.WebApp)
	if !ok {
		return fmt.Errorf("v1beta1 WebApp: convert from %T, want *v1.WebApp", h)
	}
	src.ObjectMeta.DeepCopyInto(&w.ObjectMeta)
	w.Spec = WebAppSpec{
		Container: Container{Image: src.Spec.Image, Port: src.Spec.Port},
		Replicas:  src.Spec.Replicas,
		Config:    src.Spec.Config,
	}
	src.Status.DeepCopyInto(&w.Status)
	if err := opconv.Stash(&w.ObjectMeta, v1Only{Headless: src.Spec.Headless, EnvFrom: src.Spec.EnvFrom}); err != nil {
		return fmt.Errorf("v1beta1 WebApp %s/%s: %w", src.Namespace, src.Name, err)
	}
	return nil
}
