package certs_test

import (
	"crypto/x509"
	"fmt"
	"time"

	"github.com/opkit/opkit/webhook/certs"
)

func ExampleCA_Issue() {
	ca, err := certs.NewCA("my-operator-webhook-ca", 365*24*time.Hour)
	if err != nil {
		panic(err)
	}
	kp, err := ca.Issue(append(certs.ServiceHosts("my-operator-webhook", "my-operator-system"), certs.LocalHosts()...), 7*24*time.Hour)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	_, err = kp.Cert.Verify(x509.VerifyOptions{DNSName: "my-operator-webhook.my-operator-system.svc", Roots: pool})
	fmt.Println("verifies for the service:", err == nil)
	fmt.Println("DNS SANs:", kp.Cert.DNSNames)
	fmt.Println("IP SANs:", kp.Cert.IPAddresses)
	// Output:
	// verifies for the service: true
	// DNS SANs: [my-operator-webhook my-operator-webhook.my-operator-system my-operator-webhook.my-operator-system.svc my-operator-webhook.my-operator-system.svc.cluster.local localhost]
	// IP SANs: [127.0.0.1 ::1]
}
