// Package webhooktest holds one-line test helpers for webhook code:
// [DefaultingIsIdempotent] for defaulters, [FuzzConversion] for hub/spoke
// conversions, and [ServerOptions] to serve webhooks to a testenv control plane.
//
// Guarantees: each helper reports every problem it finds through tb.Errorf
// with a go-cmp diff (first input on the "-" side), and never skips.
package webhooktest
