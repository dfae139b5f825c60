import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Built by `npm run build` into dashboard/dist, which the node serves at `/`. Asset URLs are relative so
// the page also works behind a proxy that mounts the node under a path.
// `npx vite dashboard` serves it for development against a node on SHOAL_DEV_NODE (default 52600).
const node = process.env.SHOAL_DEV_NODE ?? 'http://127.0.0.1:52600';
const apiPrefixes = ['/state', '/events', '/cluster', '/models', '/store', '/place_instance', '/instance', '/metrics', '/logs', '/v1', '/healthz'];

export default defineConfig({
  base: './',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // Everything the page needs ships with it: the node may have no network, and no request may leave it.
    assetsInlineLimit: 0,
    chunkSizeWarningLimit: 1024,
  },
  server: {
    // `ws` for /v1: voice mode's WebSocket (/v1/realtime).
    proxy: Object.fromEntries(apiPrefixes.map((prefix) => [prefix, { target: node, changeOrigin: false, ws: prefix === '/v1' }])),
  },
});
