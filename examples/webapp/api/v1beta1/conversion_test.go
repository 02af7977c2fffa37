package v1beta1_test

import (
	"testing"

	v1 "github.com/opkit/opkit/examples/webapp/api/v1"
	"github.com/opkit/opkit/examples/webapp/api/v1beta1"
	"github.com/opkit/opkit/webhook/webhooktest"
)

// FuzzWebAppConversion: v1beta1 → v1 → v1beta1 and v1 → v1beta1 → v1 lose
// nothing (spec.headless and spec.envFrom travel in an annotation of the
// v1beta1 object). Its seeds run with every `go test`; explore with
// `go test -fuzz FuzzWebAppConversion ./examples/webapp/api/v1beta1/`.
func FuzzWebAppConversion(f *testing.F) {
	webhooktest.FuzzConversion(f, &v1.WebApp{}, &v1beta1.WebApp{})
}
