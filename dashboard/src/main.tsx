import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App.js';
import { applyTheme, savedTheme, systemTheme } from './theme.js';
import './styles.css';

// Before the first paint, so a dark page does not flash white.
applyTheme(savedTheme() ?? systemTheme());

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
