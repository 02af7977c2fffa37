package controller

import (
	"context"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	webappv1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/webhook"
)

// The admission webhooks check what the CRD schema cannot express. The API
// server calls them over TLS: in the embedded demo and the tests envtest
// provides the certificate; in a cluster use cert-manager (see README.md).
//
// +kubebuilder:webhook:path=/mutate-apps-example-com-v1-webapp,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps.example.com,resources=webapps,verbs=create;update,versions=v1,name=mwebapp.apps.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-apps-example-com-v1-webapp,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.example.com,resources=webapps,verbs=create;update,versions=v1,name=vwebapp.apps.example.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=5

// SetupWebhooks registers the WebApp defaulting and validating webhooks on
// mgr's webhook server, and the conversion webhook (/convert) between
// apps.example.com/v1beta1 and v1 when mgr's scheme holds both versions.
func SetupWebhooks(mgr manager.Manager) error {
	if err := webhook.Install(mgr, &webappv1.WebApp{}, webhook.DefaultFunc[*webappv1.WebApp](Default), Validator()); err != nil {
		return err
	}
	// "/convert": v1beta1 ⇄ v1 (the hub), when mgr's scheme holds both
	// versions; controller-runtime's builder registers it.
	return builder.WebhookManagedBy(mgr, &webappv1.WebApp{}).Complete()
}

// Default fills in what the schema's defaults cannot: a valid image
// reference without a tag or digest gets ":latest" written out, so the
// Deployment shows exactly what runs. An invalid reference is left exactly as
// written, so the schema's error quotes the user's input (the mutating
// webhook runs before validation). It is deterministic and idempotent.
func Default(_ context.Context, app *webappv1.WebApp) error {
	if app.Spec.Port == 0 {
		app.Spec.Port = 8080
	}
	app.Spec.Image = defaultImage(app.Spec.Image)
	return nil
}

// defaultImage is img with ":latest" written out when it is a valid
// reference without a tag or digest, else img unchanged. [Default] applies
// it to spec.image; [Children] applies it to the container image too, for a
// WebApp stored without the defaulting webhook.
func defaultImage(img string) string {
	name := img[strings.LastIndex(img, "/")+1:]
	if imagePattern.MatchString(img) && !strings.Contains(name, ":") && !strings.Contains(name, "@") {
		return img + ":latest"
	}
	return img
}

// imagePattern is the +kubebuilder:validation:Pattern of
// webappv1.WebAppSpec.Image (a test checks the generated CRD carries it).
var imagePattern = regexp.MustCompile(ImagePattern)

// ImagePattern is the pattern spec.image must match, as the CRD schema
// declares it.
const ImagePattern = `^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?(@sha256:[a-f0-9]{64})?$`

// Validator checks config keys (they become file names in the ConfigMap) and
// refuses to flip spec.headless, which would change the Service's immutable clusterIP.
func Validator() webhook.Validator[*webappv1.WebApp] {
	return webhook.Validator[*webappv1.WebApp]{
		Create: func(_ context.Context, app *webappv1.WebApp) (admission.Warnings, field.ErrorList) {
			return warnings(app), validateConfig(app)
		},
		Update: func(_ context.Context, old, app *webappv1.WebApp) (admission.Warnings, field.ErrorList) {
			errs := validateConfig(app)
			errs = append(errs, webhook.Immutable(field.NewPath("spec", "headless"), old.Spec.Headless, app.Spec.Headless)...)
			return warnings(app), errs
		},
	}
}

func validateConfig(app *webappv1.WebApp) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "config")
	for key := range app.Spec.Config {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(p.Key(key), key, msg))
		}
	}
	return errs
}

func warnings(app *webappv1.WebApp) admission.Warnings {
	if strings.HasSuffix(app.Spec.Image, ":latest") {
		return admission.Warnings{"spec.image uses the :latest tag; pods may run different versions after a restart"}
	}
	return nil
}
