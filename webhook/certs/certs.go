package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Default file names, the ones controller-runtime's webhook server reads from
// its CertDir (webhook.Options.CertName / KeyName default to tls.crt / tls.key).
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	CAFile   = "ca.crt"
)

// backdate makes certificates valid slightly in the past, so a peer whose
// clock runs a little behind ours still accepts a certificate issued just now.
const backdate = 5 * time.Minute

// CA is a self-signed certificate authority (ECDSA P-256) held in memory. Its
// private key is never written anywhere by this package.
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// CertPEM is Cert, PEM-encoded: what goes into a caBundle.
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// NewCA creates a CA valid from now (backdated by a few minutes for clock
// skew) for validity.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		return nil, errors.New("certs: CA validity must be positive")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"opkit"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, CertPEM: pemCert(der), key: key}, nil
}

// KeyPair is a serving certificate and its private key.
type KeyPair struct {
	// Cert is the serving certificate.
	Cert *x509.Certificate
	// CertPEM and KeyPEM are what tls.X509KeyPair and the webhook server read.
	CertPEM, KeyPEM []byte
}

// Issue signs a serving certificate (ECDSA P-256, server auth) for hosts:
// DNS names, or IP addresses such as "127.0.0.1" (which become IP SANs). The
// first host is also the subject's common name. It is valid for validity, but
// never past the CA's own expiry, since a chain is only as valid as its root.
func (ca *CA) Issue(hosts []string, validity time.Duration) (*KeyPair, error) {
	if len(hosts) == 0 {
		return nil, errors.New("certs: a serving certificate needs at least one host")
	}
	if validity <= 0 {
		return nil, errors.New("certs: certificate validity must be positive")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: serving key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0], Organization: []string{"opkit"}},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certs: create serving certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: marshal serving key: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		CertPEM: pemCert(der),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// LocalHosts are the names a webhook server on this machine is reached by:
// localhost, 127.0.0.1 and ::1.
func LocalHosts() []string { return []string{"localhost", "127.0.0.1", "::1"} }

// ServiceHosts are the DNS names a Service's endpoints are reached by from
// inside a cluster, and the ones the API server uses for a webhook's
// clientConfig.service: name.namespace.svc (what the API server dials) and
// its shorter and fully-qualified forms.
func ServiceHosts(name, namespace string) []string {
	return []string{
		name,
		name + "." + namespace,
		name + "." + namespace + ".svc",
		name + "." + namespace + ".svc.cluster.local",
	}
}

// Bundle concatenates PEM certificates into one caBundle.
func Bundle(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		b.Write(pemCert(c.Raw))
	}
	return b.Bytes()
}

// WriteFiles writes a serving key pair and the CA bundle into dir (created
// 0700 if missing) as [KeyFile] (mode 0600), [CertFile] and [CAFile] (0644).
// Each file is replaced atomically (write to a temporary file, then rename),
// so a reader never sees a half-written file. The key is replaced before the
// certificate; a reader that catches the pair between the two renames sees
// a key that does not match the certificate and, like controller-runtime's
// certwatcher, keeps its previous pair until the next change event.
func WriteFiles(dir string, kp *KeyPair, caBundle []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := writeAtomic(dir, KeyFile, kp.KeyPEM, 0o600); err != nil {
		return err
	}
	if err := writeAtomic(dir, CertFile, kp.CertPEM, 0o644); err != nil {
		return err
	}
	return writeAtomic(dir, CAFile, caBundle, 0o644)
}

func writeAtomic(dir, name string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("certs: write %s: %w", name, err)
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if err := f.Chmod(perm); err != nil {
		_ = f.Close()
		return fmt.Errorf("certs: write %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("certs: write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("certs: write %s: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("certs: write %s: %w", name, err)
	}
	return nil
}

// MinTLSVersion returns a TLS option for controller-runtime's
// webhook.Options.TLSOpts that sets the server's minimum TLS version.
// controller-runtime leaves it at Go's server default, TLS 1.2; the API server's
// webhook client speaks TLS 1.3, so tls.VersionTLS13 is safe for webhooks the
// API server calls.
func MinTLSVersion(v uint16) func(*tls.Config) {
	return func(c *tls.Config) { c.MinVersion = v }
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return n, nil
}
