import { createApp } from 'vue';
import type {} from 'bcms-extensions/sdk'; // declares window.bcms (types only)
import { App } from './App';

// As BCMS's plugin UIs start. In the shell's sandboxed frame both are this frame's bridge to the shell.
window.bcms = window.parent.bcms;

createApp(App).mount('#app');
