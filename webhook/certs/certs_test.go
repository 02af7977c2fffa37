package certs_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opkit/opkit/webhook/certs"
)

func TestIssuedCertificateVerifiesForEveryHost(t *testing.T) {
	ca, err := certs.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	hosts := append(certs.LocalHosts(), certs.ServiceHosts("webhook-service", "system")...)
	kp, err := ca.Issue(hosts, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := kp.Cert.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Fatalf("key is %T, want ECDSA P-256", kp.Cert.PublicKey)
	}
	if !kp.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("serving cert NotAfter %s outlives its CA (%s)", kp.Cert.NotAfter, ca.Cert.NotAfter)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, h := range append(hosts, "webhook-service.system.svc") {
		if _, err := kp.Cert.Verify(x509.VerifyOptions{DNSName: h, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if _, err := kp.Cert.Verify(x509.VerifyOptions{DNSName: "evil.example", Roots: pool}); err == nil {
		t.Error("certificate verifies for a host it was not issued for")
	}
	other, _ := certs.NewCA("other", time.Hour)
	otherPool := x509.NewCertPool()
	otherPool.AddCert(other.Cert)
	if _, err := kp.Cert.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: otherPool}); err == nil {
		t.Error("certificate verifies against another CA")
	}
}

func TestWriteFilesModesAndPair(t *testing.T) {
	ca, _ := certs.NewCA("test-ca", time.Hour)
	kp, _ := ca.Issue([]string{"localhost"}, time.Hour)
	dir := filepath.Join(t.TempDir(), "certs")
	if err := certs.WriteFiles(dir, kp, ca.CertPEM); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{certs.KeyFile: 0o600, certs.CertFile: 0o644, certs.CAFile: 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %o, want %o", name, fi.Mode().Perm(), want)
		}
	}
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, certs.CertFile), filepath.Join(dir, certs.KeyFile)); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

func TestMinTLSVersionRefusesOlderClients(t *testing.T) {
	ca, _ := certs.NewCA("test-ca", time.Hour)
	kp, _ := ca.Issue([]string{"127.0.0.1"}, time.Hour)
	pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	certs.MinTLSVersion(tls.VersionTLS13)(srv.TLS)
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	get := func(maxVersion uint16) error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: maxVersion, MinVersion: tls.VersionTLS12}}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, http.NoBody)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(tls.VersionTLS13); err != nil {
		t.Fatalf("TLS 1.3 client refused: %v", err)
	}
	if err := get(tls.VersionTLS12); err == nil {
		t.Fatal("TLS 1.2 client accepted by a TLS 1.3 minimum server")
	}
}

func TestNewRotatorValidatesWindows(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]certs.RotatorOption{
		"no cert dir":                 nil,
		"renew-before above validity": {certs.WithCertDir(dir), certs.WithCertValidity(time.Hour, 2*time.Hour)},
		"cert window under 2 checks":  {certs.WithCertDir(dir), certs.WithCertValidity(time.Hour, time.Minute), certs.WithCheckInterval(time.Minute)},
		"CA window too short":         {certs.WithCertDir(dir), certs.WithCAValidity(time.Hour, 10*time.Second), certs.WithCertValidity(time.Hour, 5*time.Second), certs.WithCheckInterval(time.Second)},
	}
	for name, opts := range cases {
		if _, err := certs.NewRotator(nil, opts...); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := certs.NewRotator(nil, certs.WithCertDir(dir)); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
}

func TestRotatorRenewsInsideTheWindowOnly(t *testing.T) {
	dir := t.TempDir()
	r, err := certs.NewRotator(nil, certs.WithCertDir(dir),
		certs.WithCertValidity(3*time.Second, 1500*time.Millisecond), certs.WithCheckInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	read := func() string {
		b, err := os.ReadFile(filepath.Join(dir, certs.CertFile))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := r.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	first := read()
	if err := r.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if read() != first {
		t.Fatal("certificate replaced outside its renewal window")
	}
	deadline := time.Now().Add(5 * time.Second)
	for read() == first {
		if time.Now().After(deadline) {
			t.Fatal("certificate not replaced inside its renewal window")
		}
		time.Sleep(50 * time.Millisecond)
		if err := r.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.CABundle()) == 0 {
		t.Fatal("empty CA bundle")
	}
}
