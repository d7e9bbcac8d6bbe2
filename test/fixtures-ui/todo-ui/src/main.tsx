import { createApp } from 'vue';
import type {} from 'bcms-extensions/sdk'; // declares window.bcms (types only)
import { App } from './App';

// As BCMS's plugin UIs start: the shell's window.bcms (in the shell, this frame's is that one already).
window.bcms = window.parent.bcms;

createApp(App).mount('#app');
