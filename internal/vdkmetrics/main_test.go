package vdkmetrics_test

import (
	"testing"

	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
