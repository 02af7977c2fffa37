package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Targets names the cluster-scoped objects whose caBundle fields [Inject]
// sets. Every listed object must exist.
type Targets struct {
	// ValidatingWebhookConfigurations: every webhook's clientConfig.caBundle.
	ValidatingWebhookConfigurations []string
	// MutatingWebhookConfigurations: every webhook's clientConfig.caBundle.
	MutatingWebhookConfigurations []string
	// CRDs: spec.conversion.webhook.clientConfig.caBundle. The CRD must
	// already use the Webhook conversion strategy with a clientConfig.
	CRDs []string
}

func (t Targets) empty() bool {
	return len(t.ValidatingWebhookConfigurations)+len(t.MutatingWebhookConfigurations)+len(t.CRDs) == 0
}

// Inject sets caBundle on every target, with an Update per object whose
// bundle differs (none when all already match), retrying on conflicts. c
// should read live (client.New, not a manager's cache), as Inject runs before
// the manager's cache starts. All targets are attempted; the error joins each
// failure, naming the object.
func Inject(ctx context.Context, c client.Client, caBundle []byte, t Targets) error {
	var errs []error
	for _, name := range t.ValidatingWebhookConfigurations {
		errs = append(errs, update(ctx, c, name, &admissionregistrationv1.ValidatingWebhookConfiguration{},
			func(o *admissionregistrationv1.ValidatingWebhookConfiguration) (bool, error) {
				changed := false
				for i := range o.Webhooks {
					changed = setBundle(&o.Webhooks[i].ClientConfig.CABundle, caBundle) || changed
				}
				return changed, nil
			}))
	}
	for _, name := range t.MutatingWebhookConfigurations {
		errs = append(errs, update(ctx, c, name, &admissionregistrationv1.MutatingWebhookConfiguration{},
			func(o *admissionregistrationv1.MutatingWebhookConfiguration) (bool, error) {
				changed := false
				for i := range o.Webhooks {
					changed = setBundle(&o.Webhooks[i].ClientConfig.CABundle, caBundle) || changed
				}
				return changed, nil
			}))
	}
	for _, name := range t.CRDs {
		errs = append(errs, update(ctx, c, name, &apiextensionsv1.CustomResourceDefinition{},
			func(o *apiextensionsv1.CustomResourceDefinition) (bool, error) {
				conv := o.Spec.Conversion
				if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
					return false, errors.New("spec.conversion is not a webhook with a clientConfig")
				}
				return setBundle(&conv.Webhook.ClientConfig.CABundle, caBundle), nil
			}))
	}
	return errors.Join(errs...)
}

func setBundle(dst *[]byte, bundle []byte) bool {
	if bytes.Equal(*dst, bundle) {
		return false
	}
	*dst = bytes.Clone(bundle)
	return true
}

func update[T client.Object](ctx context.Context, c client.Client, name string, obj T, mutate func(T) (bool, error)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		changed, err := mutate(obj)
		if err != nil || !changed {
			return err
		}
		return c.Update(ctx, obj)
	})
	if err != nil {
		return fmt.Errorf("certs: inject caBundle into %T %s: %w", obj, name, err)
	}
	return nil
}
