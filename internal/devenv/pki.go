package devenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of the control plane's keys and certificates, all under one folder.
// They are made once and kept, so a restarted environment keeps its identity: old
// kubeconfigs stay trusted and service-account tokens stay valid.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p pki) caCert() string      { return p.path("ca.crt") }
func (p pki) caKey() string       { return p.path("ca.key") }
func (p pki) servingCert() string { return p.path("apiserver.crt") }
func (p pki) servingKey() string  { return p.path("apiserver.key") }
func (p pki) adminCert() string   { return p.path("admin.crt") }
func (p pki) adminKey() string    { return p.path("admin.key") }
func (p pki) saKey() string       { return p.path("sa.key") }
func (p pki) saPub() string       { return p.path("sa.pub") }
func (p pki) nodeCert() string    { return p.path("node.crt") }
func (p pki) nodeKey() string     { return p.path("node.key") }

// ensureNode creates, when missing, the real node's client certificate: the identity
// system:node:<RealNodeName> in group system:nodes, which Node authorization and
// NodeRestriction confine to that node's own objects.
func (p pki) ensureNode() error {
	if exists(p.nodeCert()) && exists(p.nodeKey()) {
		return nil // without reading the CA
	}
	ca, caKey, err := p.loadCA()
	if err != nil {
		return err
	}
	return p.ensureCert(p.nodeCert(), p.nodeKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + RealNodeName, Organization: []string{"system:nodes"}},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey)
}

// ensure creates whatever is missing: a CA, a serving certificate for 127.0.0.1 and
// localhost, an admin client certificate in group system:masters, and the service-account
// signing key pair. ECDSA P-256 keeps generation instant.
func (p pki) ensure() error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := p.ensureCert(p.caCert(), p.caKey(), &x509.Certificate{
		Subject:               pkix.Name{CommonName: "datajobs-dev-ca"},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil); err != nil {
		return err
	}
	ca, caKey, err := p.loadCA()
	if err != nil {
		return err
	}
	if err := p.ensureCert(p.servingCert(), p.servingKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}, ca, caKey); err != nil {
		return err
	}
	if err := p.ensureCert(p.adminCert(), p.adminKey(), &x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, caKey); err != nil {
		return err
	}
	if !exists(p.saKey()) || !exists(p.saPub()) {
		key, err := newKey()
		if err != nil {
			return err
		}
		if err := writeKey(p.saKey(), key); err != nil {
			return err
		}
		der, err := x509.MarshalPKIXPublicKey(key.Public())
		if err != nil {
			return fmt.Errorf("pki: encode service-account public key: %w", err)
		}
		if err := writePEM(p.saPub(), "PUBLIC KEY", der); err != nil {
			return err
		}
	}
	return nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate key: %w", err)
	}
	return key, nil
}

// ensureCert creates, unless both files exist, a new key at keyPath and the certificate
// of tmpl for it at certPath, signed by parent (self-signed when parent is nil).
func (p pki) ensureCert(certPath, keyPath string, tmpl, parent *x509.Certificate, parentKey crypto.Signer) error {
	if exists(certPath) && exists(keyPath) {
		return nil
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return fmt.Errorf("pki: serial: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().AddDate(10, 0, 0)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return fmt.Errorf("pki: sign %s: %w", filepath.Base(certPath), err)
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", der)
}

func (p pki) loadCA() (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(p.caCert())
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w", err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("pki: %s holds no PEM block", p.caCert())
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: parse %s: %w", p.caCert(), err)
	}
	keyPEM, err := os.ReadFile(p.caKey())
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w", err)
	}
	block, _ = pem.Decode(keyPEM)
	if block == nil {
		return nil, nil, fmt.Errorf("pki: %s holds no PEM block", p.caKey())
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: parse %s: %w", p.caKey(), err)
	}
	return cert, key, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("pki: encode key: %w", err)
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, blockType string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("pki: write %s: %w", filepath.Base(path), err)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
