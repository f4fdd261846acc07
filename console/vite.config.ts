/// <reference types="vitest/config" />
// The console builds into the local package (local/citewise_local/console), which ships it as package data:
// an installed citewise serves it with no npm and no CDN. `base: './'`: every asset URL is relative, so the
// same files work under /console/ locally and at the root of the CloudFront site on AWS.
import { defineConfig } from 'vite';

export default defineConfig({
  base: './',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: '../local/citewise_local/console',
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 2048,
  },
  test: { environment: 'node', include: ['src/**/*.test.ts'] },
});
